package rollcheck.flink;

import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.types.Row;

/**
 * Key selectors of rollcheck's keyed tap: the word's number of a word-count line "w3,17" (a Long,
 * the same key as the Python keyed operator's key_by, so the tap shares its key groups), or the
 * KEY part of a user's row "KEY\u001fROW" (a String).
 */
public final class RollcheckKeys {

    private RollcheckKeys() {
    }

    /**
     * The key of a word-count line "w3,17": Row(3L), as PyFlink's key_by keys the Python operator
     * before it (a one-field Row of the key), so that both share their key groups.
     */
    public static final class Word implements KeySelector<Object, Row> {
        private static final long serialVersionUID = 1L;

        @Override
        public Row getKey(Object value) {
            String s = value.toString();
            return Row.of(Long.parseLong(s.substring(1, s.indexOf(','))));
        }
    }

    /** The String key of a user's row "KEY\u001fROW". */
    public static final class Field implements KeySelector<Object, String> {
        private static final long serialVersionUID = 1L;

        @Override
        public String getKey(Object value) {
            String s = value.toString();
            return s.substring(0, s.indexOf('\u001f'));
        }
    }
}
