#include "mount-tools/fluid_config.h"

#include <map>
#include <nlohmann/json.hpp>

#include "mount-tools/mount_helper.h"

namespace stoker {
namespace {

// Options that are not `stoker mount`'s but the S3 origin's environment.
const std::map<std::string, std::string, std::less<>> kEnvOptions = {
    {"aws_access_key_id", "AWS_ACCESS_KEY_ID"},
    {"aws_secret_access_key", "AWS_SECRET_ACCESS_KEY"},
    {"aws_session_token", "AWS_SESSION_TOKEN"},
    {"aws_region", "AWS_REGION"},
};

std::string Underscored(std::string key) {
  for (char& c : key) c = c == '-' ? '_' : c;
  return key;
}

std::string Dashed(std::string key) {
  for (char& c : key) c = c == '_' ? '-' : c;
  return key;
}

// A string field of obj, or EINVAL naming it.
Result<std::string> StringField(const nlohmann::json& obj, const std::string& key,
                                const std::string& where) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return Status::Invalid(where + " is missing");
  if (!it->is_string()) return Status::Invalid(where + " is not a string");
  if (it->get<std::string>().empty()) return Status::Invalid(where + " is empty");
  return it->get<std::string>();
}

// The origin for a mountPoint.
Result<std::string> OriginOf(const std::string& mount_point) {
  static const std::string kLocal = "local://";
  if (mount_point.starts_with(kLocal)) {
    std::string path = mount_point.substr(kLocal.size());
    if (!path.starts_with("/")) {
      return Status::Invalid("mounts[0].mountPoint '" + mount_point +
                             "' must name an absolute path after local://");
    }
    return path;
  }
  if (mount_point.starts_with("/") || mount_point.starts_with("s3://") ||
      mount_point.starts_with("http://") || mount_point.starts_with("https://")) {
    return mount_point;
  }
  if (mount_point.starts_with("pvc://")) {
    return Status::Invalid("mounts[0].mountPoint '" + mount_point +
                           "': stoker does not mount a claim itself; mount it into the FUSE "
                           "container through the profile's volumes and name its path "
                           "(local:///PATH)");
  }
  return Status::Invalid("mounts[0].mountPoint '" + mount_point +
                         "' is not a path, local://, s3://, http:// or https://");
}

// true/false of a flag-like option.
Result<bool> Boolean(const std::string& key, const std::string& value, const std::string& where) {
  if (value == "true" || value.empty()) return true;
  if (value == "false") return false;
  return Status::Invalid(where + " option '" + key + "' is true or false, not '" + value + "'");
}

// value with each ${NAME} replaced by the variable's value.
Result<std::string> Expand(const std::string& value, const FluidDefaults& d,
                           const std::string& what) {
  std::string out;
  for (size_t i = 0; i < value.size();) {
    if (value.compare(i, 2, "${") != 0) {
      out += value[i++];
      continue;
    }
    const size_t end = value.find('}', i + 2);
    if (end == std::string::npos) return Status::Invalid(what + " has a ${ with no }");
    const std::string name = value.substr(i + 2, end - i - 2);
    const char* v = name.empty() ? nullptr : d.getenv(name.c_str());
    if (v == nullptr) {
      return Status::Invalid(what + " names ${" + name + "}, which is not set");
    }
    out += v;
    i = end + 1;
  }
  return out;
}

}  // namespace

Result<FluidMount> FluidMountOf(const std::string& config_json, const FluidDefaults& defaults) {
  nlohmann::json config = nlohmann::json::parse(config_json, nullptr, /*allow_exceptions=*/false);
  if (config.is_discarded()) return Status::Invalid("the Fluid config is not JSON");
  if (!config.is_object()) return Status::Invalid("the Fluid config is not a JSON object");
  auto mounts = config.find("mounts");
  if (mounts == config.end() || !mounts->is_array() || mounts->empty()) {
    return Status::Invalid("mounts is missing or empty: the Dataset names no mount");
  }
  if (mounts->size() > 1) {
    return Status::Invalid("mounts has " + std::to_string(mounts->size()) +
                           " entries; stoker serves one mount per Dataset");
  }
  const nlohmann::json& mount = (*mounts)[0];
  if (!mount.is_object()) return Status::Invalid("mounts[0] is not an object");
  STOKER_ASSIGN_OR_RETURN(std::string mount_point,
                          StringField(mount, "mountPoint", "mounts[0].mountPoint"));
  STOKER_ASSIGN_OR_RETURN(std::string origin, OriginOf(mount_point));
  FluidMount out;
  STOKER_ASSIGN_OR_RETURN(out.target, StringField(config, "targetPath", "targetPath"));
  if (!out.target.starts_with("/")) {
    return Status::Invalid("targetPath '" + out.target + "' is not an absolute path");
  }

  // runtimeOptions first, then the mount's: the mount's win.
  std::map<std::string, std::pair<std::string, std::string>> options;  // key -> (value, where)
  struct Source {
    const nlohmann::json* obj;
    const char* field;
    std::string where;
  };
  for (const Source& source : {Source{&config, "runtimeOptions", "runtimeOptions"},
                               Source{&mount, "options", "mounts[0].options"}}) {
    const std::string& where = source.where;
    auto it = source.obj->find(source.field);
    if (it == source.obj->end() || it->is_null()) continue;
    if (!it->is_object()) return Status::Invalid(where + " is not an object");
    for (const auto& [key, value] : it->items()) {
      if (!value.is_string()) {
        return Status::Invalid(where + " option '" + key + "' is not a string");
      }
      STOKER_ASSIGN_OR_RETURN(std::string v, Expand(value.get<std::string>(), defaults,
                                                    where + " option '" + key + "'"));
      options[Underscored(key)] = {std::move(v), where};
    }
  }
  if (!options.contains("cache")) options["cache"] = {defaults.cache_dir, "default"};
  if (!options.contains("allow_other")) options["allow_other"] = {"true", "default"};

  out.args = {"mount", origin, out.target, "--foreground"};
  std::string passed;
  for (const auto& [key, entry] : options) {
    const auto& [value, where] = entry;
    if (auto env = kEnvOptions.find(key); env != kEnvOptions.end()) {
      std::string v = value;
      if (v.starts_with(defaults.secrets_dir + "/")) {
        Result<std::string> secret = defaults.read_file(v);
        if (!secret.ok()) {
          return Status::Invalid(where + " option '" + Dashed(key) + "': secret file " + v + ": " +
                                 secret.status().message());
        }
        v = *secret;
        while (!v.empty() && (v.back() == '\n' || v.back() == '\r')) v.pop_back();
      }
      if (v.empty()) return Status::Invalid(where + " option '" + Dashed(key) + "' is empty");
      out.env.emplace_back(env->second, v);
      continue;
    }
    switch (MountOptionKindOf(key)) {
      case MountOptionKind::kValued:
        if (value.empty()) {
          return Status::Invalid(where + " option '" + Dashed(key) + "' needs a value");
        }
        out.args.push_back("--" + Dashed(key));
        out.args.push_back(value);
        break;
      case MountOptionKind::kFlag: {
        STOKER_ASSIGN_OR_RETURN(bool on, Boolean(Dashed(key), value, where));
        if (on) out.args.push_back("--" + Dashed(key));
        break;
      }
      case MountOptionKind::kPassed: {
        if (key == "max_read") {
          passed += (passed.empty() ? "" : ",") + key + "=" + value;
          break;
        }
        STOKER_ASSIGN_OR_RETURN(bool on, Boolean(key, value, where));
        if (on) passed += (passed.empty() ? "" : ",") + key;
        break;
      }
      case MountOptionKind::kIgnored:
        break;
      case MountOptionKind::kUnknown:
        return Status::Invalid(where + " option '" + Dashed(key) +
                               "' is not a stoker mount option (docs/kubernetes.md lists them)");
    }
  }
  if (!passed.empty()) {
    out.args.push_back("-o");
    out.args.push_back(passed);
  }
  return out;
}

}  // namespace stoker
