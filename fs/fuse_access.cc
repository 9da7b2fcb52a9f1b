#include "fs/fuse_access.h"

#include <fcntl.h>
#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sstream>

namespace stoker {

namespace {

constexpr const char* kDevice = "/dev/fuse";
// The kernel's FUSE device: misc major 10, minor 229.
const dev_t kFuseRdev = makedev(10, 229);

constexpr const char* kHowToAddDevice =
    "docker run --device /dev/fuse; in Kubernetes a privileged container";
constexpr const char* kHowToAddCap =
    "docker run --cap-add SYS_ADMIN; in Kubernetes securityContext.capabilities.add: "
    "[SYS_ADMIN] or privileged: true; or mount on the host and share the mount into the "
    "container with -v HOST_DIR:/data:rslave";

bool HaveEffectiveSysAdmin() {
  __user_cap_header_struct header{};
  header.version = _LINUX_CAPABILITY_VERSION_3;
  header.pid = 0;
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  if (syscall(SYS_capget, &header, data) != 0) return false;
  return (data[CAP_TO_INDEX(CAP_SYS_ADMIN)].effective & CAP_TO_MASK(CAP_SYS_ADMIN)) != 0;
}

std::string DeviceName(bool is_char, dev_t rdev) {
  if (!is_char) return "not a character device";
  return "character device " + std::to_string(major(rdev)) + ":" + std::to_string(minor(rdev));
}

}  // namespace

std::string FindFusermount3() {
  const char* env = getenv("PATH");
  std::istringstream dirs(env ? env : "/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) dir = ".";
    const std::string path = dir + "/fusermount3";
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

FuseAccess ProbeFuseAccess() {
  FuseAccess a;
  a.root = geteuid() == 0;
  struct stat st;
  if (stat(kDevice, &st) != 0) {
    a.device_errno = errno;
  } else {
    a.device_is_char = S_ISCHR(st.st_mode);
    a.device_rdev = st.st_rdev;
    // Opening the device without mounting makes no connection; closing it
    // leaves nothing behind.
    const int fd = open(kDevice, O_RDWR | O_CLOEXEC);
    if (fd < 0) {
      a.open_errno = errno;
    } else {
      close(fd);
    }
  }
  a.cap_sys_admin = HaveEffectiveSysAdmin();
  a.bounding_sys_admin = prctl(PR_CAPBSET_READ, CAP_SYS_ADMIN, 0, 0, 0) == 1;
  a.no_new_privs = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
  a.fusermount3 = FindFusermount3();
  return a;
}

Status CheckFuseAccess(const FuseAccess& a) {
  if (a.device_errno == ENOENT) {
    return Status::NotFound("/dev/fuse is missing: a FUSE mount needs the device (" +
                            std::string(kHowToAddDevice) + ")");
  }
  if (a.device_errno != 0) {
    return Status::FromErrno(a.device_errno, "/dev/fuse (" + std::string(kHowToAddDevice) + ")");
  }
  if (!a.device_is_char || a.device_rdev != kFuseRdev) {
    return Status::Invalid("/dev/fuse is not the FUSE device (character device 10:229) but " +
                           DeviceName(a.device_is_char, a.device_rdev) + " (" + kHowToAddDevice +
                           ")");
  }
  // libfuse opens the device itself before it tries mount(2) or falls back to
  // fusermount3: a container's device cgroup says EPERM here when the node
  // exists but was not passed in; a user gets EACCES where it is not 0666.
  if (a.open_errno != 0) {
    const std::string fix = a.root
                                ? kHowToAddDevice
                                : "a user needs it read-write, 0666 as Debian's udev rule makes it";
    return Status::Error(a.open_errno,
                         "/dev/fuse cannot be opened: " + std::string(std::strerror(a.open_errno)) +
                             " (" + fix + ")");
  }
  if (a.cap_sys_admin) return Status::OK();
  // Without CAP_SYS_ADMIN only the setuid fusermount3 can mount.
  const std::string who = a.root ? "this root process lacks CAP_SYS_ADMIN"
                                 : "a non-root user mounts through the setuid fusermount3";
  if (a.fusermount3.empty()) {
    if (!a.root) {
      return Status::NotFound(
          "fusermount3 not found on PATH; mounting as a user needs it (package fuse3)");
    }
    return Status::Error(EPERM,
                         "mounting needs CAP_SYS_ADMIN, which this process lacks, and "
                         "there is no fusermount3 on PATH to mount for it (" +
                             std::string(kHowToAddCap) + ")");
  }
  if (!a.bounding_sys_admin) {
    return Status::Error(EPERM, "mounting needs CAP_SYS_ADMIN: " + who +
                                    ", and its capability bounding set has dropped it, so "
                                    "fusermount3 cannot mount either (" +
                                    kHowToAddCap + ")");
  }
  if (a.no_new_privs) {
    return Status::Error(EPERM, "mounting needs CAP_SYS_ADMIN: " + who +
                                    ", and no_new_privs is set, which disables the setuid "
                                    "fusermount3 (docker --security-opt no-new-privileges, "
                                    "Kubernetes allowPrivilegeEscalation: false; " +
                                    kHowToAddCap + ")");
  }
  return Status::OK();
}

}  // namespace stoker
