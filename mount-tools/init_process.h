// What `stoker mount` does when it is PID 1, the entrypoint of a container.
//
// PID 1 has two duties no other process has. The kernel delivers to it only
// the signals it has a handler for, so a SIGTERM (docker stop, a pod's
// termination) that arrives before the daemon installed its handlers would be
// dropped and the container killed ten seconds later without an unmount. And
// every orphan in the container becomes its child: one it does not reap stays
// a zombie. So PID 1 forks: the child runs the command like any process; PID 1
// blocks and forwards SIGTERM, SIGINT and SIGHUP to it, reaps every child, and
// exits with the command's status once the command has exited (128+N if
// signal N killed it), which ends the container (the kernel kills what is
// left in the PID namespace).
//
// Thread-safety: call before any thread is started.
#pragma once

#include <functional>

namespace stoker {

// Runs command and returns its exit code. As PID 1, returns it in both
// processes: in the child command's own, in PID 1 the status the child
// exited with.
int RunAsInitIfPid1(const std::function<int()>& command);

}  // namespace stoker
