package rollcheck.flink;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;

import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;

/**
 * A pass-through operator that writes what the runtime tells every operator and Python
 * functions cannot see: the checkpoint id it restored (initializeState), every snapshot
 * (snapshotState) and completion notification, with per-key record counts.
 *
 * mode "source": elements are Long sequence numbers; per key (value mod keys) it counts
 * the records that passed. With a bucket table (a job with several input streams: one character
 * per sequence number, '0' + the index of the record's source), the key is the record's source. mode "keyed": elements are strings "key,count"; per key it keeps
 * the latest count (the keyed state of the operator before it). Both are operator state, so
 * they are restored with the checkpoint.
 */
public class RollcheckTap extends AbstractStreamOperator<Object>
        implements OneInputStreamOperator<Object, Object> {

    private static final long serialVersionUID = 1L;

    private final String name;
    private final String dir;
    private final String mode;
    private final int keys;
    private final int attemptOffset;
    private final int snapshotCostMs;
    private final String buckets;

    private transient long[] perKey;
    private transient long seen;
    private transient ListState<Long> state;
    private transient FileOutputStream out;

    public RollcheckTap(String name, String dir, String mode, Integer keys, Integer attemptOffset,
                        Integer snapshotCostMs) {
        this.name = name;
        this.dir = dir;
        this.mode = mode;
        this.keys = keys;
        this.attemptOffset = attemptOffset;
        this.snapshotCostMs = snapshotCostMs;
        this.buckets = "";
    }

    public RollcheckTap(String name, String dir, String mode, Integer keys, Integer attemptOffset,
                        Integer snapshotCostMs, String buckets) {
        this.name = name;
        this.dir = dir;
        this.mode = mode;
        this.keys = keys;
        this.attemptOffset = attemptOffset;
        this.snapshotCostMs = snapshotCostMs;
        this.buckets = buckets == null ? "" : buckets;
    }

    private int subtask() {
        return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    }

    private int attempt() {
        // a job restored from a retained checkpoint (rescaling) starts again at attempt 0:
        // the recorder numbers its attempts after those of the job it replaces
        return attemptOffset + getRuntimeContext().getTaskInfo().getAttemptNumber();
    }

    private String counts() {
        StringBuilder b = new StringBuilder("[");
        for (int i = 0; i < keys; i++) {
            if (i > 0) {
                b.append(',');
            }
            b.append(perKey[i]);
        }
        return b.append(']').toString();
    }

    private synchronized void log(String ev, String rest) throws IOException {
        if (out == null) {
            String file = dir + "/tap-" + name + "-" + subtask() + "-" + attempt() + ".jsonl";
            out = new FileOutputStream(file, true);
        }
        Instant now = Instant.now();
        long us = now.getEpochSecond() * 1000000L + now.getNano() / 1000;
        String line = "{\"ev\":\"" + ev + "\",\"tap\":\"" + name + "\",\"subtask\":" + subtask()
                + ",\"attempt\":" + attempt() + ",\"parallelism\":"
                + getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks()
                + ",\"t_us\":" + us + "," + rest + "}\n";
        out.write(line.getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    @Override
    public void initializeState(StateInitializationContext ctx) throws Exception {
        super.initializeState(ctx);
        perKey = new long[keys];
        state = ctx.getOperatorStateStore().getListState(
                new ListStateDescriptor<>("rollcheck-tap-" + name, Long.class));
        List<Long> restored = new ArrayList<>();
        for (Long v : state.get()) {
            restored.add(v);
        }
        // one entry per key: ((key + 1) << 40) + count, and (0 << 40) + seen. Each entry stands
        // alone, so a restore at another parallelism (list entries redistributed round-robin)
        // still sums to the totals over all subtasks.
        for (Long e : restored) {
            long k = (e >> 40) - 1;
            long v = e & ((1L << 40) - 1);
            if (k == -1) {
                seen += v;
            } else if (mode.equals("source")) {
                perKey[(int) k] += v;
            } else {
                perKey[(int) k] = Math.max(perKey[(int) k], v);
            }
        }
        OptionalLong id = ctx.getRestoredCheckpointId();
        log("restore", "\"checkpoint\":" + (id.isPresent() ? Long.toString(id.getAsLong()) : "null")
                + ",\"seen\":" + seen + ",\"per_key\":" + counts());
    }

    @Override
    public void processElement(StreamRecord<Object> element) throws Exception {
        Object v = element.getValue();
        if (mode.equals("source")) {
            long x = ((Number) v).longValue();
            if (buckets.isEmpty()) {
                perKey[(int) Math.floorMod(x, (long) keys)] += 1;
            } else {
                perKey[buckets.charAt((int) x) - '0'] += 1;
            }
        } else {
            String s = v.toString();
            int comma = s.indexOf(',');
            int k = Integer.parseInt(s.substring(1, comma));
            long c = Long.parseLong(s.substring(comma + 1));
            perKey[k] = Math.max(perKey[k], c);
        }
        seen += 1;
        output.collect(element);
    }

    @Override
    public void snapshotState(StateSnapshotContext ctx) throws Exception {
        super.snapshotState(ctx);
        if (snapshotCostMs > 0) {
            // a blocking checkpoint cost (utilization runs): the synchronous part of the
            // snapshot holds the task for this long, as a large synchronous state copy would
            Thread.sleep(snapshotCostMs);
        }
        state.clear();
        List<Long> flat = new ArrayList<>();
        for (int i = 0; i < keys; i++) {
            if (perKey[i] != 0) {
                flat.add(((long) (i + 1) << 40) + perKey[i]);
            }
        }
        flat.add(seen);
        state.update(flat);
        if (mode.equals("source")) {
            new FileOutputStream(dir + "/snapshot-" + ctx.getCheckpointId()).close();
        }
        log("snapshot", "\"checkpoint\":" + ctx.getCheckpointId() + ",\"seen\":" + seen
                + ",\"per_key\":" + counts());
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) throws Exception {
        super.notifyCheckpointComplete(checkpointId);
        log("complete", "\"checkpoint\":" + checkpointId);
        new FileOutputStream(dir + "/completed-" + checkpointId).close();
    }

    @Override
    public void finish() throws Exception {
        // end of input (not called when the task fails): the final counts of this subtask
        if (perKey != null) {
            log("finish", "\"seen\":" + seen + ",\"per_key\":" + counts());
        }
        super.finish();
    }

    @Override
    public void close() throws Exception {
        super.close();
        if (out != null) {
            out.close();
            out = null;
        }
    }
}
