// The per-second sliding window behind /api/stats' tables and the shed rules: a second's slot is
// reused once the second has left the window, and reading sees exactly the seconds still in it.
#include "hooks/sliding_window.hpp"

#include <gtest/gtest.h>

#include <map>

namespace tokentap::hooks {
namespace {

struct figures {
  int requests = 0;
};

std::map<std::int64_t, int> seen(const sliding_window<figures>& w, std::int64_t now) {
  std::map<std::int64_t, int> out;
  w.for_each(now, [&](std::int64_t sec, const figures& f) { out[sec] += f.requests; });
  return out;
}

TEST(SlidingWindow, ReadsExactlyTheSecondsStillInTheWindow) {
  sliding_window<figures> w(3);
  EXPECT_EQ(w.seconds(), 3);
  EXPECT_TRUE(seen(w, 100).empty());
  w.at(100).requests += 1;
  w.at(101).requests += 2;
  w.at(101).requests += 1;  // the same second: the same figures
  w.at(103).requests += 5;  // 102 had none
  EXPECT_EQ(seen(w, 103), (std::map<std::int64_t, int>{{101, 3}, {103, 5}}));  // 100 has left
  EXPECT_EQ(seen(w, 102), (std::map<std::int64_t, int>{{101, 3}}))
      << "a second after `now` is not in its window";
  EXPECT_TRUE(seen(w, 106).empty());
}

TEST(SlidingWindow, ASlotIsClearedWhenItsSecondComesRoundAgain) {
  sliding_window<figures> w(2);
  w.at(10).requests = 7;
  EXPECT_EQ(w.at(12).requests, 0) << "10's slot, now 12's, starts empty";
  w.at(12).requests = 1;
  EXPECT_EQ(seen(w, 12), (std::map<std::int64_t, int>{{12, 1}}));
}

TEST(SlidingWindow, HasAtLeastOneSecond) {
  sliding_window<figures> w(0);
  EXPECT_EQ(w.seconds(), 1);
  w.at(5).requests = 2;
  EXPECT_EQ(seen(w, 5), (std::map<std::int64_t, int>{{5, 2}}));
  EXPECT_TRUE(seen(w, 6).empty());
}

}  // namespace
}  // namespace tokentap::hooks
