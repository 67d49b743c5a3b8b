package rollcheck.flink;

import java.io.FileOutputStream;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.OptionalLong;
import java.util.stream.Collectors;
import java.util.stream.Stream;

import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyedStateBackend;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.runtime.state.VoidNamespace;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.OneInputStreamOperator;
import org.apache.flink.streaming.runtime.streamrecord.StreamRecord;
import org.apache.flink.types.Row;

/**
 * A pass-through operator on a keyed stream whose only state is KEYED state (one Long per key),
 * so that a restore at another parallelism redistributes it by key group exactly as Flink
 * redistributes every keyed operator's state.
 *
 * It writes what it restored (every key in its keyed state backend after the restore, with its
 * value, and the key-group range Flink gave this subtask), every snapshot (all keys and values)
 * and every completion notification.
 *
 * mode "count" (word count): elements "w3,17"; the key is the Long 3 (the key of the Python
 * operator before it, chained, same key groups); the state is the latest count of the key.
 * mode "rows" (a user's job): elements "KEY\u001fROW"; the key is the String KEY; the state counts
 * the rows of the key and the element leaves as "N\u001fKEY\u001fROW" (N = the row's number
 * within its key), so that the sink's output shows duplicates and gaps per key.
 */
public class RollcheckKeyedTap extends AbstractStreamOperator<Object>
        implements OneInputStreamOperator<Object, Object> {

    private static final long serialVersionUID = 1L;
    private static final String STATE = "rollcheck-keyed-tap";

    private final String name;
    private final String dir;
    private final String mode;
    private final int keys;
    private final int attemptOffset;

    private transient ValueState<Long> state;
    private transient long seen;
    private transient FileOutputStream out;

    public RollcheckKeyedTap(String name, String dir, String mode, Integer keys, Integer attemptOffset) {
        this.name = name;
        this.dir = dir;
        this.mode = mode;
        this.keys = keys;
        this.attemptOffset = attemptOffset;
    }

    private int subtask() {
        return getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
    }

    private int attempt() {
        return attemptOffset + getRuntimeContext().getTaskInfo().getAttemptNumber();
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    private synchronized void log(String ev, String rest) throws IOException {
        if (out == null) {
            String file = dir + "/tap-" + name + "-" + subtask() + "-" + attempt() + ".jsonl";
            out = new FileOutputStream(file, true);
        }
        Instant now = Instant.now();
        long us = now.getEpochSecond() * 1000000L + now.getNano() / 1000;
        KeyGroupRange kg = ((CheckpointableKeyedStateBackend<?>) getKeyedStateBackend()).getKeyGroupRange();
        String line = "{\"ev\":\"" + ev + "\",\"tap\":\"" + name + "\",\"keyed_state\":true,\"subtask\":"
                + subtask() + ",\"attempt\":" + attempt() + ",\"parallelism\":"
                + getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks() + ",\"max_parallelism\":"
                + getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks() + ",\"key_groups\":["
                + kg.getStartKeyGroup() + "," + kg.getEndKeyGroup() + "],\"t_us\":" + us + "," + rest + "}\n";
        out.write(line.getBytes(StandardCharsets.UTF_8));
        out.flush();
    }

    /** Every key in this subtask's keyed state with its value, read from the state backend. */
    private String dump() throws Exception {
        KeyedStateBackend<Object> backend = getKeyedStateBackend();
        List<Object> all;
        try (Stream<Object> ks = backend.getKeys(STATE, VoidNamespace.INSTANCE)) {
            all = ks.collect(Collectors.toList());
        }
        Object current = getCurrentKey();
        long[] perKey = new long[Math.max(keys, 0)];
        StringBuilder b = new StringBuilder("\"keys\":{");
        boolean first = true;
        for (Object k : all) {
            setCurrentKey(k);
            Long v = state.value();
            if (v == null) {
                continue;
            }
            if (!first) {
                b.append(',');
            }
            first = false;
            // a one-field Row (PyFlink's key_by) is logged as its field
            Object plain = k instanceof Row && ((Row) k).getArity() == 1 ? ((Row) k).getField(0) : k;
            b.append(quote(String.valueOf(plain))).append(':').append(v);
            if (mode.equals("count")) {
                perKey[(int) ((Number) plain).longValue()] = v;
            }
        }
        if (current != null) {
            setCurrentKey(current);
        }
        b.append('}');
        if (mode.equals("count")) {
            b.append(",\"per_key\":[");
            for (int i = 0; i < perKey.length; i++) {
                if (i > 0) {
                    b.append(',');
                }
                b.append(perKey[i]);
            }
            b.append(']');
        }
        return b.toString();
    }

    @Override
    public void initializeState(StateInitializationContext ctx) throws Exception {
        super.initializeState(ctx);
        state = getPartitionedState(new ValueStateDescriptor<>(STATE, Long.class));
        OptionalLong id = ctx.getRestoredCheckpointId();
        log("restore", "\"checkpoint\":" + (id.isPresent() ? Long.toString(id.getAsLong()) : "null")
                + ",\"seen\":0," + dump());
    }

    @Override
    public void processElement(StreamRecord<Object> element) throws Exception {
        String s = element.getValue().toString();
        seen += 1;
        if (mode.equals("count")) {
            long c = Long.parseLong(s.substring(s.indexOf(',') + 1));
            Long old = state.value();
            state.update(old == null ? c : Math.max(old, c));
            output.collect(element);
        } else {
            Long old = state.value();
            long n = old == null ? 1 : old + 1;
            state.update(n);
            output.collect(element.replace(n + "\u001f" + s));
        }
    }

    @Override
    public void snapshotState(StateSnapshotContext ctx) throws Exception {
        super.snapshotState(ctx);
        log("snapshot", "\"checkpoint\":" + ctx.getCheckpointId() + ",\"seen\":" + seen + "," + dump());
    }

    @Override
    public void notifyCheckpointComplete(long checkpointId) throws Exception {
        super.notifyCheckpointComplete(checkpointId);
        log("complete", "\"checkpoint\":" + checkpointId);
    }

    @Override
    public void finish() throws Exception {
        log("finish", "\"seen\":" + seen + "," + dump());
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
