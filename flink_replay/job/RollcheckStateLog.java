package rollcheck.flink;

import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.TreeMap;
import java.util.zip.CRC32;

import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.common.typeutils.TypeSerializer;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.memory.DataInputDeserializer;
import org.apache.flink.runtime.state.CheckpointableKeyedStateBackend;
import org.apache.flink.runtime.state.KeyGroupRange;
import org.apache.flink.runtime.state.KeyGroupRangeAssignment;
import org.apache.flink.runtime.state.RegisteredKeyValueStateBackendMetaInfo;
import org.apache.flink.runtime.state.StateEntry;
import org.apache.flink.runtime.state.StateInitializationContext;
import org.apache.flink.runtime.state.StateSnapshotContext;
import org.apache.flink.streaming.api.functions.python.DataStreamPythonFunctionInfo;
import org.apache.flink.streaming.api.operators.AbstractStreamOperator;
import org.apache.flink.streaming.api.operators.python.embedded.EmbeddedPythonKeyedCoProcessOperator;
import org.apache.flink.streaming.api.operators.python.embedded.EmbeddedPythonKeyedProcessOperator;
import org.apache.flink.streaming.api.operators.python.embedded.EmbeddedPythonWindowOperator;
import org.apache.flink.types.Row;

/**
 * The keyed state of a user's PyFlink operators, key by key, at every snapshot and right after a
 * restore, read from the operator's own keyed state backend (heap, RocksDB, or either behind the
 * changelog backend).
 *
 * rollcheck swaps PyFlink's embedded (thread mode) keyed operators for the subclasses below, which
 * behave the same and additionally log, per registered key-value state: every key (rendered with
 * its type: "rs:" a one-field Row of a String, "rl:" of a Long, "rb:" of a byte array (hex), "s:" String,
 * "l:" Long, "o:" other),
 * its key group as Flink computes it, and the key's state (namespaces and values, shown as is
 * when short, else as a CRC32 of the rendering). One file per operator, subtask and attempt:
 * ustate-OPERATORID-SUBTASK-ATTEMPT.jsonl.
 */
public final class RollcheckStateLog {

    private RollcheckStateLog() {
    }

    /** What a subclass keeps to log: run folder and attempt offset (a rescaled job's attempts follow its predecessor's). */
    static final class Where implements java.io.Serializable {
        private static final long serialVersionUID = 1L;
        final String dir;
        final int attemptOffset;

        Where(String dir, int attemptOffset) {
            this.dir = dir;
            this.attemptOffset = attemptOffset;
        }
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x));
        }
        return s.toString();
    }

    static String render(Object o) {
        if (o == null) {
            return "null";
        }
        if (o instanceof byte[]) {
            byte[] b = (byte[]) o;
            if (b.length <= 16) {
                return "0x" + hex(b);
            }
            CRC32 c = new CRC32();
            c.update(b);
            return "bytes[" + b.length + "]:" + Long.toHexString(c.getValue());
        }
        if (o instanceof Object[]) {
            return render(Arrays.asList((Object[]) o));
        }
        if (o instanceof Collection) {
            List<String> parts = new ArrayList<>();
            for (Object x : (Collection<?>) o) {
                parts.add(render(x));
            }
            return parts.toString();
        }
        if (o instanceof Map) {
            TreeMap<String, String> m = new TreeMap<>();
            for (Map.Entry<?, ?> e : ((Map<?, ?>) o).entrySet()) {
                m.put(render(e.getKey()), render(e.getValue()));
            }
            return m.toString();
        }
        return String.valueOf(o);
    }

    static String key(Object k) {
        if (k instanceof Row && ((Row) k).getArity() == 1) {
            Object f = ((Row) k).getField(0);
            if (f instanceof String) {
                return "rs:" + f;
            }
            if (f instanceof Long) {
                return "rl:" + f;
            }
            if (f instanceof byte[]) {
                return "rb:" + hex((byte[]) f); // PyFlink's key_by without key_type: the pickled key
            }
        }
        if (k instanceof String) {
            return "s:" + k;
        }
        if (k instanceof Long) {
            return "l:" + k;
        }
        return "o:" + render(k);
    }

    static String digest(List<String> entries) {
        java.util.Collections.sort(entries);
        String s = String.join(";", entries);
        if (s.length() <= 80) {
            return s;
        }
        CRC32 c = new CRC32();
        c.update(s.getBytes(StandardCharsets.UTF_8));
        return "crc:" + Long.toHexString(c.getValue()) + ":" + s.length();
    }

    static Object field(Object o, String name) throws Exception {
        for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
            try {
                Field f = c.getDeclaredField(name);
                f.setAccessible(true);
                return f.get(o);
            } catch (NoSuchFieldException e) {
                // look in the superclass
            }
        }
        return null;
    }

    /** The backend that holds the state (the changelog backend writes through to its delegate). */
    static Object innermost(Object backend) throws Exception {
        Object b = backend;
        for (int i = 0; i < 4; i++) {
            Object inner = field(b, "keyedStateBackend");
            if (inner == null || inner == b) {
                return b;
            }
            b = inner;
        }
        return b;
    }

    /** {state name: {key: [key group, state]}} as JSON, read from the backend. */
    @SuppressWarnings({"unchecked", "rawtypes"})
    static String dump(AbstractStreamOperator<?> op) throws Exception {
        Object backend = innermost(op.getKeyedStateBackend());
        int maxp = op.getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks();
        TreeMap<String, TreeMap<String, List<String>>> states = new TreeMap<>();
        TreeMap<String, Integer> groups = new TreeMap<>();
        Object heap = field(backend, "registeredKVStates");
        Object rocks = field(backend, "kvStateInformation");
        String kind;
        if (heap instanceof Map) {
            kind = "heap";
            for (Map.Entry<String, ?> e : ((Map<String, ?>) heap).entrySet()) {
                TreeMap<String, List<String>> perKey = states.computeIfAbsent(e.getKey(), x -> new TreeMap<>());
                for (Object o : (Iterable<?>) e.getValue()) {
                    StateEntry<?, ?, ?> se = (StateEntry<?, ?, ?>) o;
                    String k = key(se.getKey());
                    groups.put(k, KeyGroupRangeAssignment.assignToKeyGroup(se.getKey(), maxp));
                    perKey.computeIfAbsent(k, x -> new ArrayList<>())
                            .add(render(se.getNamespace()) + "=" + render(se.getState()));
                }
            }
        } else if (rocks instanceof Map) {
            kind = "rocksdb";
            Object db = field(backend, "db");
            int prefix = (Integer) field(backend, "keyGroupPrefixBytes");
            TypeSerializer<Object> ks = (TypeSerializer<Object>) backend.getClass().getMethod("getKeySerializer")
                    .invoke(backend);
            for (Map.Entry<String, ?> e : ((Map<String, ?>) rocks).entrySet()) {
                Object meta = field(e.getValue(), "metaInfo");
                if (!(meta instanceof RegisteredKeyValueStateBackendMetaInfo)) {
                    continue; // timers (priority queues) are not key-value state
                }
                Object cfh = field(e.getValue(), "columnFamilyHandle");
                Method newIt = null;
                for (Method m : db.getClass().getMethods()) {
                    if (m.getName().equals("newIterator") && m.getParameterCount() == 1
                            && m.getParameterTypes()[0].isInstance(cfh)) {
                        newIt = m;
                    }
                }
                if (newIt == null) {
                    throw new IllegalStateException("no RocksDB.newIterator(ColumnFamilyHandle)");
                }
                Object it = newIt.invoke(db, cfh);
                Class<?> ic = it.getClass();
                TreeMap<String, List<String>> perKey = states.computeIfAbsent(e.getKey(), x -> new TreeMap<>());
                try {
                    ic.getMethod("seekToFirst").invoke(it);
                    while ((Boolean) ic.getMethod("isValid").invoke(it)) {
                        byte[] raw = (byte[]) ic.getMethod("key").invoke(it);
                        byte[] val = (byte[]) ic.getMethod("value").invoke(it);
                        DataInputDeserializer in = new DataInputDeserializer(raw, prefix, raw.length - prefix);
                        Object k = ks.deserialize(in);
                        String kk = key(k);
                        int g = 0;
                        for (int i = 0; i < prefix; i++) {
                            g = (g << 8) | (raw[i] & 0xff);
                        }
                        groups.put(kk, g);
                        byte[] rest = Arrays.copyOfRange(raw, raw.length - in.available(), raw.length);
                        perKey.computeIfAbsent(kk, x -> new ArrayList<>()).add(render(rest) + "=" + render(val));
                        ic.getMethod("next").invoke(it);
                    }
                } finally {
                    ic.getMethod("close").invoke(it);
                }
            }
        } else {
            throw new IllegalStateException("unknown keyed state backend " + backend.getClass().getName());
        }
        StringBuilder b = new StringBuilder("\"backend\":\"" + kind + "\",\"states\":{");
        boolean firstState = true;
        for (Map.Entry<String, TreeMap<String, List<String>>> s : states.entrySet()) {
            if (!firstState) {
                b.append(',');
            }
            firstState = false;
            b.append(RollcheckKeyedTap.quote(s.getKey())).append(":{");
            boolean first = true;
            for (Map.Entry<String, List<String>> k : s.getValue().entrySet()) {
                if (!first) {
                    b.append(',');
                }
                first = false;
                b.append(RollcheckKeyedTap.quote(k.getKey())).append(":[").append(groups.get(k.getKey()))
                        .append(',').append(RollcheckKeyedTap.quote(digest(k.getValue()))).append(']');
            }
            b.append('}');
        }
        return b.append('}').toString();
    }

    static void log(AbstractStreamOperator<?> op, String name, Where w, String ev, String checkpoint) {
        try {
            int subtask = op.getRuntimeContext().getTaskInfo().getIndexOfThisSubtask();
            int attempt = w.attemptOffset + op.getRuntimeContext().getTaskInfo().getAttemptNumber();
            String opId = op.getOperatorID().toHexString();
            KeyGroupRange kg = ((CheckpointableKeyedStateBackend<?>) op.getKeyedStateBackend()).getKeyGroupRange();
            Instant now = Instant.now();
            long us = now.getEpochSecond() * 1000000L + now.getNano() / 1000;
            String line = "{\"ev\":\"" + ev + "\",\"operator\":\"" + opId + "\",\"name\":"
                    + RollcheckKeyedTap.quote(name) + ",\"subtask\":" + subtask
                    + ",\"attempt\":" + attempt + ",\"parallelism\":"
                    + op.getRuntimeContext().getTaskInfo().getNumberOfParallelSubtasks() + ",\"max_parallelism\":"
                    + op.getRuntimeContext().getTaskInfo().getMaxNumberOfParallelSubtasks() + ",\"key_groups\":["
                    + kg.getStartKeyGroup() + "," + kg.getEndKeyGroup() + "],\"checkpoint\":" + checkpoint
                    + ",\"t_us\":" + us + "," + dump(op) + "}\n";
            String file = w.dir + "/ustate-" + opId + "-" + subtask + "-" + attempt + ".jsonl";
            try (FileOutputStream out = new FileOutputStream(file, true)) {
                out.write(line.getBytes(StandardCharsets.UTF_8));
            }
        } catch (Exception e) {
            // a dump that fails is logged as such: the replay reports the state as unchecked
            try (FileOutputStream out = new FileOutputStream(w.dir + "/ustate-errors.log", true)) {
                out.write((ev + ": " + e + "\n").getBytes(StandardCharsets.UTF_8));
            } catch (IOException ignored) {
                // nothing more to do
            }
        }
    }

    static String restored(StateInitializationContext ctx) {
        OptionalLong id = ctx.getRestoredCheckpointId();
        return id.isPresent() ? Long.toString(id.getAsLong()) : "null";
    }

    /** KeyedStream.process (and map/flat_map/reduce on a keyed stream, which PyFlink runs through it). */
    public static class KeyedProcess<K, IN, OUT> extends EmbeddedPythonKeyedProcessOperator<K, IN, OUT> {
        private static final long serialVersionUID = 1L;
        private final Where where;
        private final TypeInformation<IN> in;

        public KeyedProcess(Configuration config, DataStreamPythonFunctionInfo info, TypeInformation<IN> in,
                            TypeInformation<OUT> out, String dir, Integer attemptOffset) {
            super(config, info, in, out);
            this.where = new Where(dir, attemptOffset);
            this.in = in;
        }

        @Override
        @SuppressWarnings("unchecked")
        public <T> KeyedProcess<K, IN, T> copy(DataStreamPythonFunctionInfo info, TypeInformation<T> out) {
            return new KeyedProcess<>(config, info, in, out, where.dir, where.attemptOffset);
        }

        @Override
        public void initializeState(StateInitializationContext ctx) throws Exception {
            super.initializeState(ctx);
            log(this, getOperatorName(), where, "restore", restored(ctx));
        }

        @Override
        public void snapshotState(StateSnapshotContext ctx) throws Exception {
            super.snapshotState(ctx);
            log(this, getOperatorName(), where, "snapshot", Long.toString(ctx.getCheckpointId()));
        }
    }

    /** A window on a keyed stream. */
    public static class Window<K, IN, OUT, W extends org.apache.flink.table.runtime.operators.window.Window>
            extends EmbeddedPythonWindowOperator<K, IN, OUT, W> {
        private static final long serialVersionUID = 1L;
        private final Where where;
        private final TypeInformation<IN> in;
        private final TypeSerializer<W> windows;

        public Window(Configuration config, DataStreamPythonFunctionInfo info, TypeInformation<IN> in,
                      TypeInformation<OUT> out, TypeSerializer<W> windows, String dir, Integer attemptOffset) {
            super(config, info, in, out, windows);
            this.where = new Where(dir, attemptOffset);
            this.in = in;
            this.windows = windows;
        }

        @Override
        public <T> Window<K, IN, T, W> copy(DataStreamPythonFunctionInfo info, TypeInformation<T> out) {
            return new Window<>(config, info, in, out, windows, where.dir, where.attemptOffset);
        }

        @Override
        public void initializeState(StateInitializationContext ctx) throws Exception {
            super.initializeState(ctx);
            log(this, getOperatorName(), where, "restore", restored(ctx));
        }

        @Override
        public void snapshotState(StateSnapshotContext ctx) throws Exception {
            super.snapshotState(ctx);
            log(this, getOperatorName(), where, "snapshot", Long.toString(ctx.getCheckpointId()));
        }
    }

    /** Two keyed streams connected (an interval join is built on it). */
    public static class KeyedCoProcess<K, IN1, IN2, OUT> extends EmbeddedPythonKeyedCoProcessOperator<K, IN1, IN2, OUT> {
        private static final long serialVersionUID = 1L;
        private final Where where;
        private final TypeInformation<IN1> in1;
        private final TypeInformation<IN2> in2;

        public KeyedCoProcess(Configuration config, DataStreamPythonFunctionInfo info, TypeInformation<IN1> in1,
                              TypeInformation<IN2> in2, TypeInformation<OUT> out, String dir, Integer attemptOffset) {
            super(config, info, in1, in2, out);
            this.where = new Where(dir, attemptOffset);
            this.in1 = in1;
            this.in2 = in2;
        }

        @Override
        public <T> KeyedCoProcess<K, IN1, IN2, T> copy(DataStreamPythonFunctionInfo info, TypeInformation<T> out) {
            return new KeyedCoProcess<>(config, info, in1, in2, out, where.dir, where.attemptOffset);
        }

        @Override
        public void initializeState(StateInitializationContext ctx) throws Exception {
            super.initializeState(ctx);
            log(this, getOperatorName(), where, "restore", restored(ctx));
        }

        @Override
        public void snapshotState(StateSnapshotContext ctx) throws Exception {
            super.snapshotState(ctx);
            log(this, getOperatorName(), where, "snapshot", Long.toString(ctx.getCheckpointId()));
        }
    }
}
