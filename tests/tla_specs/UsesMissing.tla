---------------------------- MODULE UsesMissing ----------------------------
EXTENDS Naturals,
        NoSuchHelpers
VARIABLE x
Init == x = 0
Next == x' = x
=============================================================================
