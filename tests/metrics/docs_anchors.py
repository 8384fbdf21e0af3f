"""The link targets of a Markdown file as GitHub renders it: explicit <a id="..."> / <a name="...">
anchors, and the slug of every heading outside code fences (lower case, punctuation but - and _
dropped, spaces to -, a repeat suffixed -1, -2 ...)."""
import re

_ANCHOR = re.compile(r'<a\s+(?:id|name)="([^"]+)"')
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _slug(text):
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path):
    found, seen, fenced = set(), {}, False
    with open(path, encoding="utf-8") as markdown:
        for line in markdown:
            if line.lstrip().startswith(("```", "~~~")):
                fenced = not fenced
                continue
            if fenced:
                continue
            found.update(_ANCHOR.findall(line))
            heading = _HEADING.match(line)
            if heading:
                slug = _slug(heading.group(2))
                count = seen.get(slug, 0)
                seen[slug] = count + 1
                found.add(slug if count == 0 else "%s-%d" % (slug, count))
    return found
