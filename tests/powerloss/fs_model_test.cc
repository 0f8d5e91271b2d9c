// FaultFsModel: the power-loss model on its own (no FUSE), from its rules in fs_model.h.
#include <gtest/gtest.h>

#include "fs_model.h"
#include "powerloss_util.h"

namespace tier::powerloss::test {
namespace {

Op Link(NodeId dir, const std::string& name, NodeId node, bool is_dir = false) {
  return Op::Link(dir, name, node, is_dir, is_dir ? 0700 : 0600);
}
Op Write(NodeId node, uint64_t offset, const std::string& data) {
  return Op::Write(node, offset, data);
}
Op SyncFile(NodeId node) {
  return Op::SyncFile(node);
}
Op SyncDir(NodeId dir) {
  return Op::SyncDir(dir);
}
Op Rename(NodeId dir, const std::string& from, NodeId dir2, const std::string& to, NodeId node) {
  return Op::Rename(dir, from, dir2, to, node);
}

std::map<size_t, Fate> All(const std::vector<Op>& log, Fate::Kind kind) {
  std::map<size_t, Fate> fates;
  for (size_t i : PendingOps(log, log.size())) fates[i].kind = kind;
  return fates;
}

TEST(FaultFsModel, UnsyncedWriteMayBeLostSyncedWriteIsKept) {
  const std::vector<Op> log = {Link(kRootNode, "f", 2), Write(2, 0, "abc"), SyncFile(2),
                               SyncDir(kRootNode), Write(2, 3, "def")};
  EXPECT_EQ(PendingOps(log, log.size()), std::vector<size_t>{4});
  const FsImage lost = CrashState(FsImage(), log, log.size(), All(log, Fate::kDropped));
  EXPECT_EQ(lost.Files().at("f"), "abc");
  const FsImage kept = CrashState(FsImage(), log, log.size(), All(log, Fate::kKept));
  EXPECT_EQ(kept.Files().at("f"), "abcdef");
}

TEST(FaultFsModel, FsyncOfAFileDoesNotMakeItsNameDurable) {
  const std::vector<Op> log = {Link(kRootNode, "f", 2), Write(2, 0, "abc"), SyncFile(2)};
  EXPECT_EQ(PendingOps(log, log.size()), std::vector<size_t>{0});
  EXPECT_TRUE(CrashState(FsImage(), log, log.size(), All(log, Fate::kDropped)).Files().empty());
  EXPECT_EQ(CrashState(FsImage(), log, log.size(), {}).Files().at("f"), "abc");
}

TEST(FaultFsModel, RenameIsAtomicAndDurableOnceItsDirectoryIsSynced) {
  FsImage base;
  base.nodes[2] = FsImage::Node{false, 0600, "old", {}};
  base.nodes[kRootNode].entries["a.tmp"] = 2;
  base.next_node = 3;
  const std::vector<Op> log = {Rename(kRootNode, "a.tmp", kRootNode, "a", 2), SyncDir(kRootNode)};
  EXPECT_EQ(PendingOps(log, 1), std::vector<size_t>{0});
  EXPECT_TRUE(PendingOps(log, 2).empty());
  const auto dropped =
      CrashState(base, log, 1, All(std::vector<Op>(log.begin(), log.begin() + 1), Fate::kDropped))
          .Files();
  EXPECT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped.count("a.tmp"), 1u);
  const auto kept = CrashState(base, log, 1, {}).Files();
  EXPECT_EQ(kept.size(), 1u);
  EXPECT_EQ(kept.count("a"), 1u);
}

TEST(FaultFsModel, CrossDirectoryRenameIsDurableOnceEitherDirectoryIsSynced) {
  const std::vector<Op> log = {Link(kRootNode, "q", 2, true), Link(kRootNode, "x", 3),
                               SyncDir(kRootNode), Rename(kRootNode, "x", 2, "x.1", 3),
                               SyncDir(kRootNode)};
  EXPECT_EQ(PendingOps(log, 4), std::vector<size_t>{3});
  EXPECT_TRUE(PendingOps(log, 5).empty());
  const auto files = CrashState(FsImage(), log, log.size(), {}).Files();
  EXPECT_EQ(files.count("q/x.1"), 1u);
  EXPECT_EQ(files.count("x"), 0u);
}

TEST(FaultFsModel, TornWriteLandsWholeSectorsOnly) {
  const std::string data(8192, 'z');
  const std::vector<Op> log = {Link(kRootNode, "f", 2), SyncDir(kRootNode), Write(2, 0, data)};
  Fate torn;
  torn.kind = Fate::kTorn;
  torn.sector_bytes = 4096;
  torn.sectors = {false, true};
  const std::string got = CrashState(FsImage(), log, log.size(), {{2, torn}}).Files().at("f");
  ASSERT_EQ(got.size(), 8192u);  // the second sector landed: the file reaches its end
  EXPECT_EQ(got.substr(0, 4096), std::string(4096, '\0'));
  EXPECT_EQ(got.substr(4096), std::string(4096, 'z'));
  torn.sector_bytes = 512;
  torn.sectors.assign(16, false);
  torn.sectors[0] = true;
  EXPECT_EQ(CrashState(FsImage(), log, log.size(), {{2, torn}}).Files().at("f"),
            std::string(512, 'z'));
}

TEST(FaultFsModel, KeptOperationsApplyInLogOrder) {
  // The page cache holds only a page's newest bytes: a crash shows an older write only when the
  // newer one was lost, never the older one over the newer.
  const std::vector<Op> log = {Link(kRootNode, "f", 2), SyncDir(kRootNode), Write(2, 0, "one"),
                               Write(2, 0, "two")};
  EXPECT_EQ(CrashState(FsImage(), log, log.size(), {}).Files().at("f"), "two");
  std::map<size_t, Fate> newer_lost;
  newer_lost[3].kind = Fate::kDropped;
  EXPECT_EQ(CrashState(FsImage(), log, log.size(), newer_lost).Files().at("f"), "one");
}

TEST(FaultFsModel, RandomFatesAreReplayableFromTheirSeed) {
  std::vector<Op> log = {Link(kRootNode, "f", 2)};
  for (int i = 0; i < 40; ++i) log.push_back(Write(2, 4096u * i, std::string(4096, 'a' + i % 26)));
  const auto a = RandomFates(log, log.size(), 7), b = RandomFates(log, log.size(), 7);
  ASSERT_EQ(a.size(), 41u);
  EXPECT_EQ(CrashState(FsImage(), log, log.size(), a).Files(),
            CrashState(FsImage(), log, log.size(), b).Files());
  uint64_t differing = 0;
  for (uint64_t seed = 8; seed < 16; ++seed) {
    differing +=
        CrashState(FsImage(), log, log.size(), RandomFates(log, log.size(), seed)).Files() !=
        CrashState(FsImage(), log, log.size(), a).Files();
  }
  EXPECT_GT(differing, 0u);
}

TEST(FaultFsModel, MaterializeThenLoadGivesTheSameTree) {
  ScratchDir dir("model");
  FsImage img;
  img.nodes[2] = FsImage::Node{true, 0700, {}, {}};
  img.nodes[3] = FsImage::Node{false, 0600, std::string("\0bytes\n", 7), {}};
  img.nodes[4] = FsImage::Node{false, 0644, "", {}};
  img.nodes[kRootNode].entries = {{"d", 2}, {"e", 4}};
  img.nodes[2].entries = {{"f", 3}};
  img.next_node = 5;
  ASSERT_EQ(Materialize(img, dir.path()), "");
  FsImage back;
  ASSERT_EQ(LoadImage(dir.path(), &back), "");
  EXPECT_EQ(back.Files(), img.Files());
  EXPECT_EQ(back.nodes.at(back.Resolve("e")).mode, 0644u);
  EXPECT_EQ(back.nodes.at(back.Resolve("d")).mode, 0700u);
}

}  // namespace
}  // namespace tier::powerloss::test
