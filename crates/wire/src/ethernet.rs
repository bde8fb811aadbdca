//! ethernet (being written).
