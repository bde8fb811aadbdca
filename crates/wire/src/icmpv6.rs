//! icmpv6 (being written).
