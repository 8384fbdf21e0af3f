#include "probes/host_files.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace ncclguard::probes {

HostFiles::HostFiles(std::filesystem::path root) : root_(std::move(root)) {}

std::filesystem::path HostFiles::Path(std::string_view host_path) const {
  std::string_view relative = host_path;
  while (!relative.empty() && relative.front() == '/') relative.remove_prefix(1);
  return root_ / std::filesystem::path(relative);
}

HostFiles::Text HostFiles::Read(std::string_view host_path, std::size_t max_bytes) const {
  return ReadPath(Path(host_path), max_bytes);
}

HostFiles::Text HostFiles::ReadPath(const std::filesystem::path& path,
                                    std::size_t max_bytes) const {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {std::nullopt, path.string() + ": " + std::strerror(errno)};
  std::string content(max_bytes, '\0');
  in.read(content.data(), static_cast<std::streamsize>(max_bytes));
  if (in.bad()) return {std::nullopt, path.string() + ": read error"};
  content.resize(static_cast<std::size_t>(in.gcount()));
  return {std::move(content), ""};
}

std::vector<std::string> HostFiles::List(std::string_view host_path) const {
  std::vector<std::string> names;
  std::error_code error;
  for (std::filesystem::directory_iterator it(Path(host_path), error), end; !error && it != end;
       it.increment(error)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

bool HostFiles::Exists(std::string_view host_path) const {
  std::error_code error;
  return std::filesystem::exists(Path(host_path), error);
}

std::string Trim(std::string_view text) {
  const auto first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) return "";
  const auto last = text.find_last_not_of(" \t\r\n");
  return std::string(text.substr(first, last - first + 1));
}

}  // namespace ncclguard::probes
