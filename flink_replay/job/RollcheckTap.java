package rollcheck.flink;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
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
    private transient long lastValue = -1;
    private transient long localSeen;
    private transient boolean inputEnded;

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
            lastValue = x;
            localSeen += 1;
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
        if (mode.equals("source")) {
            strikeIfArmed(checkpointId);
        }
    }

    /**
     * The injected failure when the pace step (same task, after this operator) reached its failure
     * point but saw no record after the checkpoints it waits for (the input ended, or a slow branch
     * elsewhere holds the job): the file "armed" holds "KIND SUBTASK NEED AFTER DEADLINE_MS"
     * (SUBTASK -1: any; NEED completed checkpoints; AFTER: at least this checkpoint id; until
     * DEADLINE_MS the completed checkpoint must have persisted data in flight, marked inflight-ID,
     * unless this subtask's input ended). Strikes once: failure.json is created exclusively.
     */
    private void strikeIfArmed(long checkpointId) throws Exception {
        Path armed = Paths.get(dir, "armed");
        if (!Files.exists(armed) || Files.exists(Paths.get(dir, "failure.json"))) {
            return;
        }
        String[] f = new String(Files.readAllBytes(armed), StandardCharsets.UTF_8).trim().split(" ");
        int only = Integer.parseInt(f[1]);
        int need = Integer.parseInt(f[2]);
        long after = Long.parseLong(f[3]);
        long deadline = Long.parseLong(f[4]);
        if (only >= 0 && only != subtask()) {
            return;
        }
        int completed = 0;
        String[] names = new java.io.File(dir).list();
        for (String n : names == null ? new String[0] : names) {
            if (n.startsWith("completed-")) {
                completed += 1;
            }
        }
        if (completed < need || checkpointId < after) {
            return;
        }
        if (deadline > 0 && !inputEnded && System.currentTimeMillis() < deadline
                && !Files.exists(Paths.get(dir, "inflight-" + checkpointId))) {
            return;
        }
        double t = System.currentTimeMillis() / 1000.0;
        String info = "{\"t\":" + t + ",\"value\":" + lastValue + ",\"local_index\":" + localSeen
                + ",\"failure\":\"" + f[0] + "\",\"pid\":" + ProcessHandle.current().pid()
                + ",\"where\":\"checkpoint-complete\",\"subtask\":" + subtask() + ",\"attempt\":"
                + getRuntimeContext().getTaskInfo().getAttemptNumber() + ",\"after_checkpoint\":" + checkpointId
                + ",\"operator\":\"rollcheck-tap-source\",\"input_ended\":" + inputEnded + "}";
        try {
            Files.write(Paths.get(dir, "failure.json"), info.getBytes(StandardCharsets.UTF_8),
                    StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
        } catch (FileAlreadyExistsException e) {
            return;
        }
        log("strike", "\"checkpoint\":" + checkpointId);
        if (f[0].equals("taskmanager")) {
            Runtime.getRuntime().halt(137); // the TaskManager process dies, as a kill -9 would
        }
        throw new RuntimeException("rollcheck: injected task failure after checkpoint " + checkpointId);
    }

    @Override
    public void finish() throws Exception {
        // end of input (not called when the task fails): the final counts of this subtask
        inputEnded = true;
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
