// Offline batch: `deepinfer generate` killed with SIGKILL mid-run and rerun yields every id
// exactly once, with the same results as an uninterrupted run (greedy and seeded sampling are
// deterministic whatever the batch).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

extern char** environ;

namespace {

const std::string kModel = std::string(DI_TEST_DATA_DIR) + "/tiny-v4-b";

pid_t spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  std::string l;
  while (std::getline(in, l)) ++n;
  return n;
}

std::map<std::string, nlohmann::json> read_results(const std::string& path, int* duplicates) {
  std::map<std::string, nlohmann::json> m;
  std::ifstream in(path);
  std::string l;
  while (std::getline(in, l)) {
    auto j = nlohmann::json::parse(l);
    if (m.count(j["id"].get<std::string>())) ++*duplicates;
    m[j["id"].get<std::string>()] = j;
  }
  return m;
}

TEST(GenerateResume, KillNineThenRerunGivesEveryIdOnceWithTheSameResults) {
  const auto dir = std::filesystem::temp_directory_path() / ("deepinfer-resume-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string in = (dir / "in.jsonl").string(), out = (dir / "out.jsonl").string(),
                    ref = (dir / "ref.jsonl").string();
  {
    std::ofstream f(in);
    for (int i = 0; i < 48; ++i) {
      nlohmann::json line{{"id", "req" + std::to_string(i)},
                          {"prompt_tokens", {0, 3 + i, 40 + 2 * i, 7}},
                          {"max_tokens", 60 + (i % 5) * 20},
                          {"ignore_eos", true}};
      if (i % 2) line["temperature"] = 0;
      else line["seed"] = i, line["temperature"] = 0.9;
      f << line.dump() << "\n";
    }
  }
  const std::vector<std::string> base{DI_CLI_PATH, "generate", kModel, "--input", in, "--threads", "1",
                                      "--concurrency", "4", "--no-progress"};
  auto with_out = [&](const std::string& o) {
    auto a = base;
    a.insert(a.end(), {"--output", o});
    return a;
  };
  ASSERT_EQ(wait_exit(spawn(with_out(ref))), 0);
  ASSERT_EQ(count_lines(ref), 48u);

  // Kill once some (not all) results are written; a line may be cut in half.
  pid_t pid = spawn(with_out(out));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (count_lines(out) < 6 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  kill(pid, SIGKILL);
  wait_exit(pid);
  const size_t partial = count_lines(out);
  EXPECT_GE(partial, 6u);
  EXPECT_LT(partial, 48u) << "the run finished before it could be killed; make it longer";

  ASSERT_EQ(wait_exit(spawn(with_out(out))), 0);
  int dups = 0, ref_dups = 0;
  const auto got = read_results(out, &dups), want = read_results(ref, &ref_dups);
  EXPECT_EQ(dups, 0);
  ASSERT_EQ(got.size(), 48u);
  for (const auto& [id, j] : want) {
    ASSERT_TRUE(got.count(id)) << id;
    EXPECT_EQ(got.at(id)["tokens"], j["tokens"]) << id;
    EXPECT_EQ(got.at(id)["finish_reason"], j["finish_reason"]) << id;
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
