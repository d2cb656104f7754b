// docs/configuration.md's settings table against the code's settings table
// (Settings() in agent/config/config_schema.h), both ways: every setting has one
// row with its key, flag, env var, their second names and its default as
// `gpu-agent config` prints it; every row names a real setting.
#include <algorithm>
#include <cstddef>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config/config.h"
#include "agent/config/config_schema.h"
#include "gtest/gtest.h"

namespace gpu_agent {
namespace {

constexpr std::string_view kHeader = "| key | flag | env | default | meaning |";

struct DocRow {
  int line = 0;  // 1-based, in the document
  std::string key;
  std::vector<std::string> flags;  // as written: "--name", first the setting's own
  std::vector<std::string> envs;
  std::vector<std::string> defaults;  // the default cell's code spans (one expected)
};

// The cells of a Markdown table row; "\|" is a bar inside a cell.
std::vector<std::string> Cells(std::string_view line) {
  std::vector<std::string> cells;
  std::string cell;
  bool open = false;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\\' && i + 1 < line.size() && line[i + 1] == '|') {
      cell += '|';
      ++i;
    } else if (line[i] == '|') {
      if (open) cells.push_back(cell);
      cell.clear();
      open = true;
    } else {
      cell += line[i];
    }
  }
  return cells;
}

// The text of each `code span` in a cell, in order.
std::vector<std::string> CodeSpans(std::string_view cell) {
  std::vector<std::string> spans;
  for (size_t start = cell.find('`'); start != std::string_view::npos;) {
    const size_t end = cell.find('`', start + 1);
    if (end == std::string_view::npos) break;
    spans.emplace_back(cell.substr(start + 1, end - start - 1));
    start = cell.find('`', end + 1);
  }
  return spans;
}

std::string Join(const std::vector<std::string>& items) {
  if (items.empty()) return "(none)";
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : ", ") + item;
  return out;
}

// The rows of the first table with kHeader; errors (no table, a malformed
// row) are appended to `problems`.
std::vector<DocRow> ParseSettingsTable(const std::string& doc, std::vector<std::string>* problems) {
  std::vector<DocRow> rows;
  std::istringstream in(doc);
  std::string line;
  int number = 0;
  bool found = false;
  while (std::getline(in, line)) {
    ++number;
    if (line == kHeader) {
      found = true;
      break;
    }
  }
  if (!found) {
    problems->push_back("no settings table (a line \"" + std::string(kHeader) + "\")");
    return rows;
  }
  std::getline(in, line);  // |---|
  ++number;
  while (std::getline(in, line) && line.starts_with("|")) {
    ++number;
    const std::vector<std::string> cells = Cells(line);
    const std::string where = "docs line " + std::to_string(number);
    if (cells.size() != 5) {
      problems->push_back(where + ": " + std::to_string(cells.size()) + " cells, not 5");
      continue;
    }
    const std::vector<std::string> key = CodeSpans(cells[0]);
    if (key.size() != 1) {
      problems->push_back(where + ": the key cell must hold one `key`");
      continue;
    }
    rows.push_back(
        DocRow{number, key[0], CodeSpans(cells[1]), CodeSpans(cells[2]), CodeSpans(cells[3])});
  }
  return rows;
}

// What the documented table must say for `s`.
DocRow Expected(const Setting& s) {
  DocRow want;
  want.key = s.key;
  if (!s.flag.empty()) want.flags.push_back("--" + std::string(s.flag));
  if (!s.env.empty()) want.envs.emplace_back(s.env);
  for (const SettingAlias& alias : SettingAliases()) {
    if (alias.key != s.key) continue;
    if (!alias.flag.empty()) want.flags.push_back("--" + std::string(alias.flag));
    if (!alias.env.empty()) want.envs.emplace_back(alias.env);
  }
  Config defaults;
  want.defaults.push_back(FormatSetting(s, defaults));
  return want;
}

// Every difference between the documented rows and Settings(), each naming
// the key and what differs; empty when they agree.
std::vector<std::string> Differences(const std::vector<DocRow>& rows) {
  std::vector<std::string> out;
  std::map<std::string, const DocRow*> by_key;
  for (const DocRow& row : rows) {
    if (!by_key.emplace(row.key, &row).second) {
      out.push_back(row.key + ": documented twice (docs line " + std::to_string(row.line) + ")");
    }
    if (FindSetting(row.key) == nullptr) {
      out.push_back(row.key + ": documented (docs line " + std::to_string(row.line) +
                    ") but no such setting in Settings()");
    }
  }
  for (const Setting& s : Settings()) {
    const std::string key(s.key);
    const auto it = by_key.find(key);
    if (it == by_key.end()) {
      out.push_back(key + ": a setting in Settings() with no row in docs/configuration.md");
      continue;
    }
    const DocRow& got = *it->second;
    const DocRow want = Expected(s);
    auto compare = [&](std::string_view what, const std::vector<std::string>& doc,
                       const std::vector<std::string>& code) {
      if (doc != code) {
        out.push_back(key + ": " + std::string(what) + " differs: docs say " + Join(doc) +
                      ", the code has " + Join(code));
      }
    };
    compare("flag", got.flags, want.flags);
    compare("env var", got.envs, want.envs);
    compare("default", got.defaults, want.defaults);
  }
  return out;
}

std::string ReadDoc(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(SettingsDocTest, ConfigurationTableMatchesTheSettingsTable) {
  const std::string path = std::string(GPU_AGENT_DOCS_DIR) + "/configuration.md";
  const std::string doc = ReadDoc(path);
  ASSERT_FALSE(doc.empty()) << "cannot read " << path;
  std::vector<std::string> problems;
  const std::vector<DocRow> rows = ParseSettingsTable(doc, &problems);
  for (const std::string& p : Differences(rows)) problems.push_back(p);
  for (const std::string& p : problems) ADD_FAILURE() << p;
}

TEST(SettingsDocTest, RowsFollowTheOrderGpuAgentConfigPrints) {
  std::vector<std::string> problems;
  const std::vector<DocRow> rows =
      ParseSettingsTable(ReadDoc(std::string(GPU_AGENT_DOCS_DIR) + "/configuration.md"), &problems);
  std::vector<std::string> code_order;
  for (const Setting& s : Settings()) code_order.emplace_back(s.key);
  for (size_t i = 0; i < rows.size() && i < code_order.size(); ++i) {
    if (rows[i].key != code_order[i]) {
      ADD_FAILURE() << rows[i].key << ": row " << i + 1 << " (docs line " << rows[i].line
                    << "), where `gpu-agent config` prints " << code_order[i];
      break;
    }
  }
}

// The checker itself: a table that drifted from the code is reported, by key.
std::string TableOf(const std::vector<std::string>& rows) {
  std::string doc = "# Configuration\n\n" + std::string(kHeader) + "\n|---|---|---|---|---|\n";
  for (const std::string& row : rows) doc += row + "\n";
  return doc + "\nprose after the table\n";
}

std::string RowOf(const Setting& s) {
  const DocRow want = Expected(s);
  auto spans = [](const std::vector<std::string>& items) {
    std::string out;
    for (const std::string& item : items) out += (out.empty() ? "`" : " (`") + item + "`";
    for (size_t i = 1; i < items.size(); ++i) out += ")";
    return out;
  };
  return "| `" + want.key + "` | " + spans(want.flags) + " | " + spans(want.envs) + " | `" +
         want.defaults[0] + "` | meaning, with a \\| bar |";
}

std::vector<std::string> CheckDoc(const std::string& doc) {
  std::vector<std::string> problems;
  const std::vector<DocRow> rows = ParseSettingsTable(doc, &problems);
  for (const std::string& p : Differences(rows)) problems.push_back(p);
  return problems;
}

bool Mentions(const std::vector<std::string>& problems, std::string_view a, std::string_view b) {
  return std::any_of(problems.begin(), problems.end(), [&](const std::string& p) {
    return p.find(a) != std::string::npos && p.find(b) != std::string::npos;
  });
}

std::vector<std::string> AllRows() {
  std::vector<std::string> rows;
  for (const Setting& s : Settings()) rows.push_back(RowOf(s));
  return rows;
}

TEST(SettingsDocTest, CheckerAcceptsATableWrittenFromTheCode) {
  EXPECT_EQ(CheckDoc(TableOf(AllRows())), std::vector<std::string>{});
}

TEST(SettingsDocTest, CheckerNamesTheKeyAndWhatDiffers) {
  const std::vector<std::string> good = AllRows();
  auto replace = [&](std::string_view key, std::string_view from, std::string_view to) {
    std::vector<std::string> rows = good;
    for (std::string& row : rows) {
      if (row.starts_with("| `" + std::string(key) + "` ")) {
        row.replace(row.find(from), from.size(), to);
      }
    }
    return CheckDoc(TableOf(rows));
  };
  struct Case {
    std::string name;
    std::vector<std::string> problems;
    std::string key;
    std::string what;
  };
  const std::vector<Case> cases = {
      {"default", replace("health.recoveryPeriod", "`1m`", "`60s`"), "health.recoveryPeriod",
       "default differs: docs say 60s, the code has 1m"},
      {"flag", replace("flags.migStrategy", "--mig-strategy", "--mig"), "flags.migStrategy",
       "flag differs"},
      {"env", replace("mode", "GPU_AGENT_MODE", "MODE"), "mode", "env var differs"},
      {"second name", replace("flags.nvidiaDriverRoot", " (`--driver-root`)", ""),
       "flags.nvidiaDriverRoot", "--driver-root"},
      {"unknown key", replace("log.format", "`log.format`", "`log.style`"), "log.style",
       "no such setting"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    EXPECT_TRUE(Mentions(c.problems, c.key, c.what)) << Join(c.problems);
  }
  std::vector<std::string> missing = good;
  missing.erase(missing.begin() + 1);
  EXPECT_TRUE(Mentions(CheckDoc(TableOf(missing)), std::string(Settings()[1].key), "no row"));
  std::vector<std::string> twice = good;
  twice.push_back(good[0]);
  EXPECT_TRUE(Mentions(CheckDoc(TableOf(twice)), std::string(Settings()[0].key), "twice"));
  EXPECT_TRUE(Mentions(CheckDoc("# no table\n"), "no settings table", ""));
}

}  // namespace
}  // namespace gpu_agent
