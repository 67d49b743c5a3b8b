package rollcheck.flink;

import org.apache.flink.api.java.functions.KeySelector;

/**
 * Key selectors of rollcheck's keyed tap: the word's number of a word-count line "w3,17" (a Long,
 * the same key as the Python keyed operator's key_by, so the tap shares its key groups), or the
 * KEY part of a user's row "KEY\u001fROW" (a String).
 */
public final class RollcheckKeys {

    private RollcheckKeys() {
    }

    /** The Long key of a word-count line "w3,17". */
    public static final class Word implements KeySelector<Object, Long> {
        private static final long serialVersionUID = 1L;

        @Override
        public Long getKey(Object value) {
            String s = value.toString();
            return Long.parseLong(s.substring(1, s.indexOf(',')));
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
