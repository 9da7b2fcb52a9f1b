#include "mount-tools/init_process.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace stoker {

int RunAsInitIfPid1(const std::function<int()>& command) {
  if (getpid() != 1) return command();
  // Blocked signals are queued even for PID 1 (the kernel drops only those
  // it would ignore), so nothing sent from now on is lost.
  sigset_t handled, previous;
  sigemptyset(&handled);
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaddset(&handled, sig);
  sigprocmask(SIG_BLOCK, &handled, &previous);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = fork();
  if (child < 0) {
    std::fprintf(stderr,
                 "stoker: warning: as PID 1, could not fork a child (%s); running "
                 "without reaping orphans\n",
                 std::strerror(errno));
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return command();
  }
  if (child == 0) {
    sigprocmask(SIG_SETMASK, &previous, nullptr);
    return command();
  }
  for (;;) {
    siginfo_t info;
    const int sig = sigwaitinfo(&handled, &info);
    if (sig < 0) continue;  // EINTR
    if (sig != SIGCHLD) {
      kill(child, sig);
      continue;
    }
    // One SIGCHLD may stand for several exits.
    int exit_code = -1;
    for (;;) {
      int status = 0;
      const pid_t pid = waitpid(-1, &status, WNOHANG);
      if (pid <= 0) break;
      if (pid != child) continue;
      exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    if (exit_code >= 0) return exit_code;
  }
}

}  // namespace stoker
