#include "apiserver/kubeconfig.h"

#include <yaml-cpp/yaml.h>

#include <map>

#include "absl/strings/escaping.h"
#include "base/file_util.h"
#include "base/status_macros.h"
#include "base/strings.h"

namespace gpu_agent::apiserver {
namespace {

// Kubeconfigs with inline certificates are tens of KiB.
constexpr size_t kMaxKubeconfigBytes = 4u << 20;

struct Named {
  YAML::Node node;
  std::string file;  // where it was defined
};

std::string Where(const std::string& file, const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  if (m.is_null()) return file;
  return StrCat(file, ":", m.line + 1, ":", m.column + 1);
}

std::string Folder(const std::string& file) {
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? "." : file.substr(0, slash);
}

std::string Resolve(const std::string& file, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  return Folder(file) + "/" + path;
}

// Reads `key` of a mapping as a string; "" when absent.
absl::StatusOr<std::string> Str(const YAML::Node& map, const char* key, const std::string& file) {
  YAML::Node v = map[key];
  if (!v || v.IsNull()) return std::string();
  if (!v.IsScalar()) {
    return absl::InvalidArgumentError(StrCat(Where(file, v), ": ", key, " must be a string"));
  }
  return v.Scalar();
}

absl::Status Collect(const YAML::Node& root, const char* list, const char* inner,
                     const std::string& file, std::map<std::string, Named>* out) {
  YAML::Node items = root[list];
  if (!items || items.IsNull()) return absl::OkStatus();
  if (!items.IsSequence()) {
    return absl::InvalidArgumentError(StrCat(Where(file, items), ": ", list, " must be a list"));
  }
  for (const YAML::Node& item : items) {
    if (!item.IsMap() || !item["name"] || !item["name"].IsScalar()) {
      return absl::InvalidArgumentError(
          StrCat(Where(file, item), ": each entry of ", list, " needs a name"));
    }
    YAML::Node body = item[inner];
    if (!body || !body.IsMap()) {
      return absl::InvalidArgumentError(StrCat(Where(file, item), ": ", list, " entry \"",
                                               item["name"].Scalar(), "\" has no ", inner,
                                               " mapping"));
    }
    out->emplace(item["name"].Scalar(), Named{body, file});  // first file wins
  }
  return absl::OkStatus();
}

}  // namespace

bool Base64Decode(std::string_view in, std::string* out) {
  return absl::Base64Unescape(absl::string_view(in.data(), in.size()), out);
}

absl::Status CheckBearerToken(std::string_view token) {
  if (token.empty()) return absl::InvalidArgumentError("the token is empty");
  for (size_t i = 0; i < token.size(); ++i) {
    const auto c = static_cast<unsigned char>(token[i]);
    if (c < 0x21 || c > 0x7e) {
      static constexpr char kHex[] = "0123456789abcdef";
      return absl::InvalidArgumentError(
          StrCat("the token has byte 0x", std::string{kHex[c >> 4], kHex[c & 15]}, " at offset ", i,
                 ", which an HTTP header cannot carry (printable ASCII without blanks only)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<KubeconfigSelection> LoadKubeconfig(const std::string& paths,
                                                   const std::string& context) {
  std::map<std::string, Named> clusters, users, contexts;
  std::string current;
  std::vector<std::string> files;
  for (std::string_view p : StrSplit(paths, ':')) {
    if (!p.empty()) files.emplace_back(p);
  }
  if (files.empty()) return absl::InvalidArgumentError("no kubeconfig file given");
  bool any = false;
  for (const std::string& file : files) {
    YAML::Node root;
    absl::StatusOr<std::string> text = ReadFileBounded(file, kMaxKubeconfigBytes);
    if (!text.ok()) {
      // kubectl skips missing files in a list.
      if (files.size() > 1 && text.status().code() == absl::StatusCode::kNotFound) continue;
      return absl::Status(text.status().code(), StrCat("kubeconfig: ", text.status().message()));
    }
    try {
      root = YAML::Load(*text);
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          StrCat(file, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
    }
    any = true;
    if (root.IsNull()) continue;
    if (!root.IsMap()) {
      return absl::InvalidArgumentError(StrCat(file, ": a kubeconfig must be a mapping"));
    }
    try {
      if (absl::Status s = Collect(root, "clusters", "cluster", file, &clusters); !s.ok()) return s;
      if (absl::Status s = Collect(root, "users", "user", file, &users); !s.ok()) return s;
      if (absl::Status s = Collect(root, "contexts", "context", file, &contexts); !s.ok()) return s;
      if (current.empty()) {
        absl::StatusOr<std::string> cc = Str(root, "current-context", file);
        if (!cc.ok()) return cc.status();
        current = *cc;
      }
    } catch (const YAML::Exception& e) {
      return absl::InvalidArgumentError(
          StrCat(file, ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
    }
  }
  if (!any) return absl::NotFoundError(StrCat("none of the kubeconfig files exist: ", paths));
  KubeconfigSelection sel;
  sel.context = context.empty() ? current : context;
  if (sel.context.empty()) {
    return absl::InvalidArgumentError(
        StrCat("kubeconfig ", paths, " has no current-context; pass --context"));
  }
  auto ctx = contexts.find(sel.context);
  if (ctx == contexts.end()) {
    std::vector<std::string> names;
    for (auto& [n, _] : contexts) names.push_back(n);
    return absl::InvalidArgumentError(StrCat("context \"", sel.context,
                                             "\" not found in kubeconfig ", paths,
                                             " (contexts: ", StrJoin(names, ", "), ")"));
  }
  try {
    absl::StatusOr<std::string> cluster_name = Str(ctx->second.node, "cluster", ctx->second.file);
    absl::StatusOr<std::string> user_name = Str(ctx->second.node, "user", ctx->second.file);
    if (!cluster_name.ok()) return cluster_name.status();
    if (!user_name.ok()) return user_name.status();
    auto cl = clusters.find(*cluster_name);
    if (cl == clusters.end()) {
      return absl::InvalidArgumentError(StrCat(Where(ctx->second.file, ctx->second.node),
                                               ": context \"", sel.context, "\" names cluster \"",
                                               *cluster_name, "\", which is not defined"));
    }
    const std::string& cf = cl->second.file;
    const YAML::Node& c = cl->second.node;
    GA_ASSIGN_OR_RETURN(sel.server, Str(c, "server", cf));
    if (sel.server.empty()) {
      return absl::InvalidArgumentError(
          StrCat(Where(cf, c), ": cluster \"", *cluster_name, "\" has no server"));
    }
    std::string ca;
    GA_ASSIGN_OR_RETURN(ca, Str(c, "certificate-authority", cf));
    sel.ca_file = Resolve(cf, ca);
    std::string ca_data;
    GA_ASSIGN_OR_RETURN(ca_data, Str(c, "certificate-authority-data", cf));
    if (!ca_data.empty() && !Base64Decode(ca_data, &sel.ca_pem)) {
      return absl::InvalidArgumentError(
          StrCat(Where(cf, c["certificate-authority-data"]), ": not valid base64"));
    }
    std::string insecure;
    GA_ASSIGN_OR_RETURN(insecure, Str(c, "insecure-skip-tls-verify", cf));
    sel.insecure_skip_tls_verify = insecure == "true";
    GA_ASSIGN_OR_RETURN(sel.tls_server_name, Str(c, "tls-server-name", cf));

    if (!user_name->empty()) {
      auto us = users.find(*user_name);
      if (us == users.end()) {
        return absl::InvalidArgumentError(StrCat(Where(ctx->second.file, ctx->second.node),
                                                 ": context \"", sel.context, "\" names user \"",
                                                 *user_name, "\", which is not defined"));
      }
      const std::string& uf = us->second.file;
      const YAML::Node& u = us->second.node;
      GA_ASSIGN_OR_RETURN(sel.token, Str(u, "token", uf));
      if (!sel.token.empty()) {
        if (absl::Status bad = CheckBearerToken(sel.token); !bad.ok()) {
          return absl::InvalidArgumentError(
              StrCat(Where(uf, u), ": user \"", *user_name, "\" token: ", bad.message()));
        }
      }
      std::string tf;
      GA_ASSIGN_OR_RETURN(tf, Str(u, "tokenFile", uf));
      sel.token_file = Resolve(uf, tf);
      std::string cert, key, cert_data, key_data;
      GA_ASSIGN_OR_RETURN(cert, Str(u, "client-certificate", uf));
      GA_ASSIGN_OR_RETURN(key, Str(u, "client-key", uf));
      sel.client_cert_file = Resolve(uf, cert);
      sel.client_key_file = Resolve(uf, key);
      GA_ASSIGN_OR_RETURN(cert_data, Str(u, "client-certificate-data", uf));
      GA_ASSIGN_OR_RETURN(key_data, Str(u, "client-key-data", uf));
      if (!cert_data.empty() && !Base64Decode(cert_data, &sel.client_cert_pem)) {
        return absl::InvalidArgumentError(
            StrCat(Where(uf, u["client-certificate-data"]), ": not valid base64"));
      }
      if (!key_data.empty() && !Base64Decode(key_data, &sel.client_key_pem)) {
        return absl::InvalidArgumentError(
            StrCat(Where(uf, u["client-key-data"]), ": not valid base64"));
      }
      if (YAML::Node ex = u["exec"]; ex && !ex.IsNull()) {
        if (!ex.IsMap())
          return absl::InvalidArgumentError(StrCat(Where(uf, ex), ": exec must be a mapping"));
        ExecConfig e;
        GA_ASSIGN_OR_RETURN(e.command, Str(ex, "command", uf));
        if (e.command.empty()) {
          return absl::InvalidArgumentError(StrCat(Where(uf, ex), ": exec needs a command"));
        }
        if (e.command.find('/') != std::string::npos) e.command = Resolve(uf, e.command);
        GA_ASSIGN_OR_RETURN(e.api_version, Str(ex, "apiVersion", uf));
        if (YAML::Node args = ex["args"]; args && args.IsSequence()) {
          for (const YAML::Node& a : args) e.args.push_back(a.as<std::string>());
        }
        if (YAML::Node env = ex["env"]; env && env.IsSequence()) {
          for (const YAML::Node& kv : env) {
            e.env.emplace_back(kv["name"].as<std::string>(), kv["value"].as<std::string>());
          }
        }
        sel.exec = std::move(e);
      }
      if ((!sel.client_cert_file.empty() || !sel.client_cert_pem.empty()) !=
          (!sel.client_key_file.empty() || !sel.client_key_pem.empty())) {
        return absl::InvalidArgumentError(StrCat(Where(uf, u), ": user \"", *user_name,
                                                 "\" has a client certificate without a key, or "
                                                 "a key without a certificate"));
      }
    }
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        StrCat("kubeconfig:", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  return sel;
}

}  // namespace gpu_agent::apiserver
