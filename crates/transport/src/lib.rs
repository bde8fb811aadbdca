//! weft-transport: the InfiniBand transport (RC, UC, UD) that RoCEv2 carries, as a
//! sans-IO state machine. It owns no socket, thread or clock.
#![forbid(unsafe_code)]
