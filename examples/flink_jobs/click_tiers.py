"""Example Flink job: enrichment from broadcast state (``docs/your-flink-job.md``).

Each user's tier is broadcast to every subtask (broadcast state, replicated, restored on every
subtask after a failure or a rescale); clicks, keyed by user, are enriched with it. A click that
arrives before its user's tier waits in keyed state and is emitted with the tier later (at the
latest when the input ends), so the output is a pure function of the input.
"""

import random

from pyflink.common import Types
from pyflink.common.watermark_strategy import TimestampAssigner, WatermarkStrategy
from pyflink.datastream.functions import KeyedBroadcastProcessFunction
from pyflink.datastream.state import ListStateDescriptor, MapStateDescriptor

KEY = [0]  # click id
TIERS = MapStateDescriptor("tiers", Types.STRING(), Types.STRING())
END = 2 ** 62  # an event-time timer that fires when the input ends (final watermark)


def records(seed):
    """One tier per user, then 400 clicks; the order is shuffled a little."""
    rng = random.Random(seed)
    users = [f"u{i}" for i in range(20)]
    out = [("tier", u, rng.choice(["free", "pro", "team"]), 0) for u in users]
    out += [("click", c, rng.choice(users), c * 50) for c in range(400)]
    for _ in range(40):
        i, j = rng.randrange(len(out)), rng.randrange(len(out))
        out[i], out[j] = out[j], out[i]
    return out


class ByTime(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[3]


class Enrich(KeyedBroadcastProcessFunction):
    def open(self, runtime_context):
        self.waiting = runtime_context.get_list_state(ListStateDescriptor("waiting", Types.LONG()))

    def process_element(self, click, ctx):
        tiers = ctx.get_broadcast_state(TIERS)
        user = click[2]
        if tiers.contains(user):
            for c in list(self.waiting.get() or []):
                yield c, user, tiers.get(user)
            self.waiting.clear()
            yield click[1], user, tiers.get(user)
        else:
            self.waiting.add(click[1])
            ctx.timer_service().register_event_time_timer(END)

    def process_broadcast_element(self, tier, ctx):
        ctx.get_broadcast_state(TIERS).put(tier[1], tier[2])

    def on_timer(self, timestamp, ctx):
        user = ctx.get_current_key()
        tier = ctx.get_broadcast_state(TIERS).get(user)
        for c in list(self.waiting.get() or []):
            yield c, user, tier
        self.waiting.clear()


def job(env, source):
    timed = source.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(ByTime()))
    tiers = timed.filter(lambda r: r[0] == "tier").broadcast(TIERS)
    clicks = timed.filter(lambda r: r[0] == "click").key_by(lambda r: r[2], key_type=Types.STRING())
    return clicks.connect(tiers).process(Enrich())
