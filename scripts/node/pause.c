/* The test node's pod sandbox process (containerd's sandbox_image): holds the
 * pod's namespaces, reaps orphans, exits on SIGINT/SIGTERM. Built statically
 * by scripts/image.sh into a FROM-scratch image, since no registry is
 * reachable from the node. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void on_stop(int sig) {
  (void)sig;
  _exit(0);
}

static void on_child(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {.sa_handler = on_stop};
  struct sigaction child = {.sa_handler = on_child, .sa_flags = SA_NOCLDSTOP};
  if (sigaction(SIGINT, &stop, NULL) != 0 || sigaction(SIGTERM, &stop, NULL) != 0 ||
      sigaction(SIGCHLD, &child, NULL) != 0) {
    return 1;
  }
  for (;;) {
    pause();
  }
}
