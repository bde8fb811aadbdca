//! icmpv4 (being written).
