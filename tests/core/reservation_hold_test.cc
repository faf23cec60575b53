// A backfill reservation, once made, holds (issue 20, defect 1): at its due time its holder starts
// before a job that was not ahead of it when it was made, even one that sorts before it by then; under
// every job order that opts in (all but DRF).
#include <gtest/gtest.h>

#include "scheduler_fixture.h"

namespace tessera {
namespace {

class ReservationHoldTest : public SchedulerTest {
 protected:
  // One node of 8 GPUs, busy until kNow + 3600 with bob's job; alice's 8-GPU gang (job 3) and
  // bob's 1-GPU job (job 2) arrived in the same second. Now alice's gang sorts first (bob uses 8
  // GPUs) and reserves the node; once bob's job ends, both users use nothing and job 2's lower id
  // puts it first.
  void setup() {
    make_cluster(1, 8);
    make_queues({{"q", "", {}, {}, 1}});
    running(1, "q", "research", 1, 8, kNow - 100, "bob").expected_runtime = 3700;
    pending(2, "q", "research", 1, 1, kNow - 50, "bob").expected_runtime = 7200;
    pending(3, "q", "research", 1, 8, kNow - 50, "alice").expected_runtime = 7200;
  }
  // The cycle at kNow + 3600, after job 1 ended.
  Decisions at_due_time() {
    end_job_1();
    return cycle(kNow + 3600);
  }
  void end_job_1() {
    for (const TaskPlacement& p : jobs.front().placement) ASSERT_TRUE(cluster.release(p).ok());
    jobs.erase(jobs.begin());
  }
};

TEST_F(ReservationHoldTest, TheHolderStartsAtItsDueTime) {
  setup();
  Decisions d = cycle();
  ASSERT_TRUE(d.reservation.has_value());
  EXPECT_EQ(d.reservation->job.value, 3u);
  EXPECT_EQ(d.reservation->start, kNow + 3600);

  reservation = d.reservation;  // as the caller passes it back
  d = at_due_time();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{3})) << "the reserved gang must start at its due time";
}

TEST_F(ReservationHoldTest, WithoutTheHeldReservationTheOrderAloneDecides) {
  setup();
  (void)cycle();
  Decisions d = at_due_time();  // no reservation passed back: job 2 sorts first and takes a GPU
  EXPECT_EQ(started(d), (std::vector<uint32_t>{2}));
}

TEST_F(ReservationHoldTest, AJobThatWasAheadOfItKeepsItsPlace) {
  setup();
  reservation = cycle().reservation;
  ASSERT_TRUE(reservation.has_value());
  EXPECT_TRUE(reservation->ahead.empty()) << "job 2 sorted after the gang when the reservation was made";
  reservation->ahead = {JobId(2u)};  // as if job 2 had been ahead then (e.g. waiting for its victims to leave)
  Decisions d = at_due_time();
  EXPECT_EQ(started(d), (std::vector<uint32_t>{2})) << "a job ahead of the holder when it was made stays ahead";
}

TEST_F(ReservationHoldTest, OffLetsTheOrderAloneDecide) {
  setup();
  config.reservation_hold = ReservationHold::kOff;
  reservation = cycle().reservation;
  ASSERT_TRUE(reservation.has_value()) << "a reservation is still made and returned";
  EXPECT_EQ(started(at_due_time()), (std::vector<uint32_t>{2}));
}

TEST_F(ReservationHoldTest, AtDueHoldsOnlyOnceItsStartHasCome) {
  setup();
  config.reservation_hold = ReservationHold::kAtDue;
  reservation = cycle().reservation;
  ASSERT_TRUE(reservation.has_value());
  end_job_1();
  EXPECT_EQ(started(cycle(kNow + 3599)), (std::vector<uint32_t>{2})) << "not due yet: the order decides";
  EXPECT_EQ(started(cycle(kNow + 3600)), (std::vector<uint32_t>{3})) << "due: the holder goes first";
}

TEST_F(ReservationHoldTest, TheSameHolderKeepsItsFirstPromise) {
  setup();
  reservation = cycle().reservation;
  ASSERT_TRUE(reservation.has_value());
  EXPECT_EQ(reservation->promised, kNow + 3600);
  reservation->promised = kNow + 1800;  // as if first promised earlier, and the start slipped since
  const Decisions d = cycle(kNow + 60);
  ASSERT_TRUE(d.reservation.has_value());
  EXPECT_EQ(d.reservation->job.value, 3u);
  EXPECT_EQ(d.reservation->promised, kNow + 1800) << "re-made by the same holder: the first promise stands";
}

TEST_F(ReservationHoldTest, AHoldLapsesOnceItsPromiseSlipsTooFar) {
  setup();
  config.reservation_slip = 600;
  reservation = cycle().reservation;
  ASSERT_TRUE(reservation.has_value());
  end_job_1();
  EXPECT_EQ(started(cycle(kNow + 3600 + 600)), (std::vector<uint32_t>{3})) << "within the slip: it holds";
  EXPECT_EQ(started(cycle(kNow + 3600 + 601)), (std::vector<uint32_t>{2})) << "lapsed: the order decides";
}

TEST_F(ReservationHoldTest, AHigherClassStillGoesFirst) {
  setup();
  reservation = cycle().reservation;
  end_job_1();
  pending(4, "q", "production-inference", 1, 1, kNow + 3000, "carol");
  Decisions d = cycle(kNow + 3600);
  ASSERT_FALSE(d.start.empty());
  EXPECT_EQ(d.start.front().job.value, 4u) << "urgent work is served at once";
}

// The rule is the cycle's, around every job order that opts in (core/sched/job_order.h): under FIFO
// job 2 (same second, lower id) goes first unless job 3's reservation is held.
TEST_F(ReservationHoldTest, HeldUnderAStaticOrderToo) {
  setup();
  config.order = JobOrder::kFifo;
  end_job_1();
  EXPECT_EQ(started(cycle(kNow + 3600)), (std::vector<uint32_t>{2}));
  reservation = HeldReservation{JobId(3u), kNow + 3600, {}};
  EXPECT_EQ(started(cycle(kNow + 3600)), (std::vector<uint32_t>{3}));
  reservation->ahead = {JobId(2u)};
  EXPECT_EQ(started(cycle(kNow + 3600)), (std::vector<uint32_t>{2}));
}

// DRF does not opt in (as it never did): the holder takes its turn by dominant share and age.
TEST_F(ReservationHoldTest, DrfDoesNotHoldIt) {
  setup();
  config.order = JobOrder::kDrf;
  end_job_1();
  reservation = HeldReservation{JobId(3u), kNow + 3600, {}};
  EXPECT_EQ(started(cycle(kNow + 3600)), (std::vector<uint32_t>{2}));
}

}  // namespace
}  // namespace tessera
