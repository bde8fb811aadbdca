//! The C structures and constants of `<infiniband/verbs.h>` (rdma-core 44) that weft
//! reads or writes, laid out by hand with `#[repr(C)]`.
//!
//! Every size, offset and constant here is listed in [`layout`] under the C expression
//! that gives its value; `tests/layout.rs` compiles a C program that prints each of
//! those expressions against the installed headers and compares, so a mismatch fails
//! CI. Fields weft never touches are kept as opaque padding of the right size.
#![allow(missing_docs, non_camel_case_types, missing_debug_implementations)]

use std::ffi::{c_char, c_int, c_uint, c_void};
use std::mem::{align_of, offset_of, size_of};

/// `union ibv_gid`: 16 bytes, 8-byte aligned (it overlays two `__be64`).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

#[repr(C)]
#[derive(Debug)]
pub struct _ibv_device_ops {
    pub _dummy1: *mut c_void,
    pub _dummy2: *mut c_void,
}

pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;

#[repr(C)]
#[derive(Debug)]
pub struct ibv_device {
    pub _ops: _ibv_device_ops,
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

pub type PollCqFn = unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int;
pub type ReqNotifyFn = unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int;
pub type PostSendFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int;
pub type PostRecvFn =
    unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type PostSrqRecvFn =
    unsafe extern "C" fn(*mut ibv_srq, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int;
pub type QueryPortFn =
    unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int;
pub type CreateCqExFn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_cq_init_attr_ex) -> *mut ibv_cq_ex;
pub type CreateQpExFn =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp;
pub type QueryDeviceExFn =
    unsafe extern "C" fn(*mut ibv_context, *const c_void, *mut ibv_device_attr_ex, usize) -> c_int;

/// `struct ibv_context_ops`: 32 function pointers; the data path (`ibv_post_send`,
/// `ibv_poll_cq`, … are inline functions in verbs.h) calls through the named ones.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_context_ops {
    pub _compat0: [usize; 7],
    pub alloc_mw: usize,
    pub bind_mw: usize,
    pub dealloc_mw: usize,
    pub _compat1: usize,
    pub poll_cq: Option<PollCqFn>,
    pub req_notify_cq: Option<ReqNotifyFn>,
    pub _compat2: [usize; 7],
    pub post_srq_recv: Option<PostSrqRecvFn>,
    pub _compat3: [usize; 4],
    pub post_send: Option<PostSendFn>,
    pub post_recv: Option<PostRecvFn>,
    pub _compat4: [usize; 5],
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `__VERBS_ABI_IS_EXTENDED`: `abi_compat` says a `verbs_context` lies in front.
pub const VERBS_ABI_IS_EXTENDED: usize = usize::MAX;

/// `struct verbs_context`: the extended operations, in front of the `ibv_context`
/// (`verbs_get_ctx_op` checks `sz` and the pointer before calling one).
#[repr(C)]
#[derive(Debug)]
pub struct verbs_context {
    pub query_port: Option<QueryPortFn>,
    pub _ops0: [usize; 24],
    pub create_cq_ex: Option<CreateCqExFn>,
    pub priv_: usize,
    pub query_device_ex: Option<QueryDeviceExFn>,
    pub _ops1: [usize; 5],
    pub create_qp_ex: Option<CreateQpExFn>,
    pub _ops2: [usize; 4],
    pub _abi_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_int,
    pub qp_type: c_int,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: libc::pthread_mutex_t,
    pub cond: libc::pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wr_rdma {
    pub remote_addr: u64,
    pub rkey: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wr_atomic {
    pub remote_addr: u64,
    pub compare_add: u64,
    pub swap: u64,
    pub rkey: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wr_ud {
    pub ah: *mut ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union ibv_send_wr_wr {
    pub rdma: wr_rdma,
    pub atomic: wr_atomic,
    pub ud: wr_ud,
}

#[repr(C)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: c_int,
    pub send_flags: c_uint,
    /// `imm_data` (`__be32`) or `invalidate_rkey`.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    pub qp_type_xrc_remote_srqn: u32,
    /// The `bind_mw`/`tso` union weft does not implement.
    pub _tail: [u64; 6],
}

#[repr(C)]
#[derive(Debug)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: c_int,
    pub opcode: c_int,
    pub vendor_err: u32,
    pub byte_len: u32,
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_qp_attr {
    pub qp_state: c_int,
    pub cur_qp_state: c_int,
    pub path_mtu: c_int,
    pub path_mig_state: c_int,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_port_attr {
    pub state: c_int,
    pub max_mtu: c_int,
    pub active_mtu: c_int,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_int,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_cq_ex`: an `ibv_cq` (same prefix; `ibv_cq_ex_to_cq` is a cast) with
/// the extended polling state and functions (`ibv_start_poll`, `ibv_next_poll`, …).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq_ex {
    pub cq: ibv_cq,
    pub comp_mask: u32,
    pub status: c_int,
    pub wr_id: u64,
    pub start_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex, *mut c_void) -> c_int>,
    pub next_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub end_poll: Option<unsafe extern "C" fn(*mut ibv_cq_ex)>,
    pub read_opcode: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_int>,
    pub read_vendor_err: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_byte_len: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_imm_data: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_qp_num: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_src_qp: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_wc_flags: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> c_uint>,
    pub read_slid: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u32>,
    pub read_sl: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    pub read_dlid_path_bits: Option<unsafe extern "C" fn(*mut ibv_cq_ex) -> u8>,
    /// completion_ts, cvlan, flow_tag, tm_info, completion_wallclock_ns: not offered
    /// (creating a CQ that asks for them is `EOPNOTSUPP`).
    pub _unsupported: [usize; 5],
}

/// `struct ibv_cq_init_attr_ex`.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_cq_init_attr_ex {
    pub cqe: u32,
    pub cq_context: *mut c_void,
    pub channel: *mut ibv_comp_channel,
    pub comp_vector: u32,
    pub wc_flags: u64,
    pub comp_mask: u32,
    pub flags: u32,
    pub parent_domain: *mut ibv_pd,
}

pub type QpExFn = unsafe extern "C" fn(*mut ibv_qp_ex);

/// `struct ibv_qp_ex`: an `ibv_qp` with the work-request builder (`ibv_wr_start`,
/// `ibv_wr_send`, `ibv_wr_set_sge`, …, `ibv_wr_complete`).
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp_ex {
    pub qp_base: ibv_qp,
    pub comp_mask: u64,
    pub wr_id: u64,
    pub wr_flags: c_uint,
    pub wr_atomic_cmp_swp: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64, u64)>,
    pub wr_atomic_fetch_add: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u64)>,
    pub wr_bind_mw: usize,
    pub wr_local_inv: usize,
    pub wr_rdma_read: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64)>,
    pub wr_rdma_write_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_send: Option<QpExFn>,
    pub wr_send_imm: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32)>,
    pub wr_send_inv: usize,
    pub wr_send_tso: usize,
    pub wr_set_ud_addr: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut ibv_ah, u32, u32)>,
    pub wr_set_xrc_srqn: usize,
    pub wr_set_inline_data: Option<unsafe extern "C" fn(*mut ibv_qp_ex, *mut c_void, usize)>,
    pub wr_set_inline_data_list:
        Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_data_buf)>,
    pub wr_set_sge: Option<unsafe extern "C" fn(*mut ibv_qp_ex, u32, u64, u32)>,
    pub wr_set_sge_list: Option<unsafe extern "C" fn(*mut ibv_qp_ex, usize, *const ibv_sge)>,
    pub wr_start: Option<QpExFn>,
    pub wr_complete: Option<unsafe extern "C" fn(*mut ibv_qp_ex) -> c_int>,
    pub wr_abort: Option<QpExFn>,
    pub wr_atomic_write: usize,
}

/// `struct ibv_data_buf` (`ibv_wr_set_inline_data_list`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ibv_data_buf {
    pub addr: *mut c_void,
    pub length: usize,
}

/// `struct ibv_qp_init_attr_ex`: the fields of `ibv_qp_init_attr` (flat: `comp_mask`
/// fills the base structure's tail padding) and the extended ones.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: c_int,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    pub create_flags: u32,
    pub max_tso_header: u16,
    pub rwq_ind_tbl: *mut c_void,
    /// `struct ibv_rx_hash_conf` (u8, u8, u8 *key, u64) and `source_qpn`.
    pub _rx_hash_conf: [u64; 3],
    pub source_qpn: u32,
    pub send_ops_flags: u64,
}

pub const IBV_QP_INIT_ATTR_PD: u32 = 1;
pub const IBV_QP_INIT_ATTR_SEND_OPS_FLAGS: u32 = 1 << 6;
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;
pub const IBV_QP_EX_WITH_SEND: u64 = 1 << 2;
pub const IBV_QP_EX_WITH_SEND_WITH_IMM: u64 = 1 << 3;
pub const IBV_QP_EX_WITH_RDMA_READ: u64 = 1 << 4;
pub const IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP: u64 = 1 << 5;
pub const IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD: u64 = 1 << 6;
pub const IBV_WC_STANDARD_FLAGS: u64 = 0x7f;
pub const IBV_CQ_INIT_ATTR_MASK_FLAGS: u32 = 1;
pub const IBV_CQ_INIT_ATTR_MASK_PD: u32 = 1 << 1;
pub const IBV_CREATE_CQ_ATTR_SINGLE_THREADED: u32 = 1;

/// `struct ibv_device_attr_ex` begins with `ibv_device_attr orig_attr` and
/// `uint32_t comp_mask`; weft fills those and zeroes the rest (no extended
/// capabilities), up to the size the caller passes.
#[repr(C)]
#[derive(Debug)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
}

/// `struct ibv_gid_entry` (`ibv_query_gid_ex`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

// enum ibv_wr_opcode
pub const IBV_WR_RDMA_WRITE: c_int = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: c_int = 1;
pub const IBV_WR_SEND: c_int = 2;
pub const IBV_WR_SEND_WITH_IMM: c_int = 3;
pub const IBV_WR_RDMA_READ: c_int = 4;
pub const IBV_WR_ATOMIC_CMP_AND_SWP: c_int = 5;
pub const IBV_WR_ATOMIC_FETCH_AND_ADD: c_int = 6;
// enum ibv_send_flags
pub const IBV_SEND_FENCE: c_uint = 1;
pub const IBV_SEND_SIGNALED: c_uint = 2;
pub const IBV_SEND_SOLICITED: c_uint = 4;
pub const IBV_SEND_INLINE: c_uint = 8;
// enum ibv_wc_opcode
pub const IBV_WC_SEND: c_int = 0;
pub const IBV_WC_RDMA_WRITE: c_int = 1;
pub const IBV_WC_RDMA_READ: c_int = 2;
pub const IBV_WC_COMP_SWAP: c_int = 3;
pub const IBV_WC_FETCH_ADD: c_int = 4;
pub const IBV_WC_RECV: c_int = 128;
pub const IBV_WC_RECV_RDMA_WITH_IMM: c_int = 129;
// enum ibv_wc_flags
pub const IBV_WC_GRH: c_uint = 1;
pub const IBV_WC_WITH_IMM: c_uint = 2;
// enum ibv_wc_status (in order)
pub const IBV_WC_SUCCESS: c_int = 0;
pub const IBV_WC_LOC_LEN_ERR: c_int = 1;
pub const IBV_WC_LOC_QP_OP_ERR: c_int = 2;
pub const IBV_WC_LOC_PROT_ERR: c_int = 4;
pub const IBV_WC_WR_FLUSH_ERR: c_int = 5;
pub const IBV_WC_MW_BIND_ERR: c_int = 6;
pub const IBV_WC_BAD_RESP_ERR: c_int = 7;
pub const IBV_WC_LOC_ACCESS_ERR: c_int = 8;
pub const IBV_WC_REM_INV_REQ_ERR: c_int = 9;
pub const IBV_WC_REM_ACCESS_ERR: c_int = 10;
pub const IBV_WC_REM_OP_ERR: c_int = 11;
pub const IBV_WC_RETRY_EXC_ERR: c_int = 12;
pub const IBV_WC_RNR_RETRY_EXC_ERR: c_int = 13;
pub const IBV_WC_REM_INV_RD_REQ_ERR: c_int = 15;
pub const IBV_WC_REM_ABORT_ERR: c_int = 16;
pub const IBV_WC_GENERAL_ERR: c_int = 21;
// enum ibv_qp_state
pub const IBV_QPS_RESET: c_int = 0;
pub const IBV_QPS_INIT: c_int = 1;
pub const IBV_QPS_RTR: c_int = 2;
pub const IBV_QPS_RTS: c_int = 3;
pub const IBV_QPS_SQD: c_int = 4;
pub const IBV_QPS_SQE: c_int = 5;
pub const IBV_QPS_ERR: c_int = 6;
// enum ibv_qp_type
pub const IBV_QPT_RC: c_int = 2;
pub const IBV_QPT_UC: c_int = 3;
pub const IBV_QPT_UD: c_int = 4;
// enum ibv_qp_attr_mask
pub const IBV_QP_STATE: c_int = 1 << 0;
pub const IBV_QP_CUR_STATE: c_int = 1 << 1;
pub const IBV_QP_ACCESS_FLAGS: c_int = 1 << 3;
pub const IBV_QP_PKEY_INDEX: c_int = 1 << 4;
pub const IBV_QP_PORT: c_int = 1 << 5;
pub const IBV_QP_QKEY: c_int = 1 << 6;
pub const IBV_QP_AV: c_int = 1 << 7;
pub const IBV_QP_PATH_MTU: c_int = 1 << 8;
pub const IBV_QP_TIMEOUT: c_int = 1 << 9;
pub const IBV_QP_RETRY_CNT: c_int = 1 << 10;
pub const IBV_QP_RNR_RETRY: c_int = 1 << 11;
pub const IBV_QP_RQ_PSN: c_int = 1 << 12;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = 1 << 13;
pub const IBV_QP_ALT_PATH: c_int = 1 << 14;
pub const IBV_QP_MIN_RNR_TIMER: c_int = 1 << 15;
pub const IBV_QP_SQ_PSN: c_int = 1 << 16;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = 1 << 17;
pub const IBV_QP_CAP: c_int = 1 << 19;
pub const IBV_QP_DEST_QPN: c_int = 1 << 20;
// enum ibv_access_flags
pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 2;
pub const IBV_ACCESS_REMOTE_READ: c_int = 4;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 8;
pub const IBV_ACCESS_MW_BIND: c_int = 16;
// enum ibv_mtu
pub const IBV_MTU_256: c_int = 1;
pub const IBV_MTU_4096: c_int = 5;
// port
pub const IBV_PORT_ACTIVE: c_int = 4;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
pub const IBV_NODE_CA: c_int = 1;
pub const IBV_TRANSPORT_IB: c_int = 0;
pub const IBV_ATOMIC_HCA: c_int = 1;
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;
/// `IBV_GID_TYPE_SYSFS_ROCE_V2` of rdma-core's private driver.h (not installed).
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: c_int = 1;
pub const IBV_FORK_UNNEEDED: c_int = 2;

macro_rules! size {
    ($t:ident) => {
        (
            concat!("sizeof(struct ", stringify!($t), ")"),
            size_of::<$t>(),
        )
    };
}
macro_rules! off {
    ($t:ident, $($f:tt).+ => $c:literal) => {
        (
            concat!("offsetof(struct ", stringify!($t), ", ", $c, ")"),
            offset_of!($t, $($f).+),
        )
    };
    ($t:ident, $f:ident) => {
        (
            concat!("offsetof(struct ", stringify!($t), ", ", stringify!($f), ")"),
            offset_of!($t, $f),
        )
    };
}
macro_rules! val {
    ($($c:ident),* $(,)?) => { [$((stringify!($c), $c as i64 as usize)),*] };
}

/// Every layout fact weft relies on: `(C expression, value in weft)`.
pub fn layout() -> Vec<(&'static str, usize)> {
    let mut v = vec![
        size!(ibv_device),
        off!(ibv_device, node_type),
        off!(ibv_device, name),
        off!(ibv_device, dev_name),
        off!(ibv_device, dev_path),
        off!(ibv_device, ibdev_path),
        size!(ibv_context_ops),
        off!(ibv_context_ops, alloc_mw),
        off!(ibv_context_ops, poll_cq),
        off!(ibv_context_ops, req_notify_cq),
        off!(ibv_context_ops, post_srq_recv),
        off!(ibv_context_ops, post_send),
        off!(ibv_context_ops, post_recv),
        size!(ibv_context),
        off!(ibv_context, ops),
        off!(ibv_context, cmd_fd),
        off!(ibv_context, num_comp_vectors),
        off!(ibv_context, mutex),
        off!(ibv_context, abi_compat),
        size!(verbs_context),
        off!(verbs_context, query_port),
        off!(verbs_context, create_cq_ex),
        off!(verbs_context, priv_ => "priv"),
        off!(verbs_context, query_device_ex),
        off!(verbs_context, create_qp_ex),
        off!(verbs_context, sz),
        off!(verbs_context, context),
        size!(ibv_pd),
        off!(ibv_pd, handle),
        size!(ibv_mr),
        off!(ibv_mr, pd),
        off!(ibv_mr, addr),
        off!(ibv_mr, length),
        off!(ibv_mr, handle),
        off!(ibv_mr, lkey),
        off!(ibv_mr, rkey),
        size!(ibv_comp_channel),
        off!(ibv_comp_channel, fd),
        off!(ibv_comp_channel, refcnt),
        size!(ibv_cq),
        off!(ibv_cq, channel),
        off!(ibv_cq, cq_context),
        off!(ibv_cq, handle),
        off!(ibv_cq, cqe),
        off!(ibv_cq, mutex),
        off!(ibv_cq, cond),
        off!(ibv_cq, comp_events_completed),
        off!(ibv_cq, async_events_completed),
        size!(ibv_qp),
        off!(ibv_qp, qp_context),
        off!(ibv_qp, pd),
        off!(ibv_qp, send_cq),
        off!(ibv_qp, recv_cq),
        off!(ibv_qp, srq),
        off!(ibv_qp, handle),
        off!(ibv_qp, qp_num),
        off!(ibv_qp, state),
        off!(ibv_qp, qp_type),
        off!(ibv_qp, mutex),
        off!(ibv_qp, cond),
        off!(ibv_qp, events_completed),
        size!(ibv_srq),
        off!(ibv_srq, srq_context),
        off!(ibv_srq, pd),
        off!(ibv_srq, handle),
        off!(ibv_srq, events_completed),
        size!(ibv_ah),
        off!(ibv_ah, pd),
        off!(ibv_ah, handle),
        size!(ibv_sge),
        off!(ibv_sge, length),
        off!(ibv_sge, lkey),
        size!(ibv_send_wr),
        off!(ibv_send_wr, next),
        off!(ibv_send_wr, sg_list),
        off!(ibv_send_wr, num_sge),
        off!(ibv_send_wr, opcode),
        off!(ibv_send_wr, send_flags),
        off!(ibv_send_wr, imm_data),
        off!(ibv_send_wr, wr.rdma.remote_addr => "wr.rdma.remote_addr"),
        off!(ibv_send_wr, wr.rdma.rkey => "wr.rdma.rkey"),
        off!(ibv_send_wr, wr.atomic.remote_addr => "wr.atomic.remote_addr"),
        off!(ibv_send_wr, wr.atomic.compare_add => "wr.atomic.compare_add"),
        off!(ibv_send_wr, wr.atomic.swap => "wr.atomic.swap"),
        off!(ibv_send_wr, wr.atomic.rkey => "wr.atomic.rkey"),
        off!(ibv_send_wr, wr.ud.ah => "wr.ud.ah"),
        off!(ibv_send_wr, wr.ud.remote_qpn => "wr.ud.remote_qpn"),
        off!(ibv_send_wr, wr.ud.remote_qkey => "wr.ud.remote_qkey"),
        off!(ibv_send_wr, qp_type_xrc_remote_srqn => "qp_type.xrc.remote_srqn"),
        off!(ibv_send_wr, _tail => "bind_mw"),
        size!(ibv_recv_wr),
        off!(ibv_recv_wr, next),
        off!(ibv_recv_wr, sg_list),
        off!(ibv_recv_wr, num_sge),
        size!(ibv_wc),
        off!(ibv_wc, status),
        off!(ibv_wc, opcode),
        off!(ibv_wc, vendor_err),
        off!(ibv_wc, byte_len),
        off!(ibv_wc, imm_data),
        off!(ibv_wc, qp_num),
        off!(ibv_wc, src_qp),
        off!(ibv_wc, wc_flags),
        off!(ibv_wc, pkey_index),
        off!(ibv_wc, slid),
        off!(ibv_wc, sl),
        off!(ibv_wc, dlid_path_bits),
        size!(ibv_global_route),
        off!(ibv_global_route, flow_label),
        off!(ibv_global_route, sgid_index),
        off!(ibv_global_route, hop_limit),
        off!(ibv_global_route, traffic_class),
        size!(ibv_ah_attr),
        off!(ibv_ah_attr, dlid),
        off!(ibv_ah_attr, sl),
        off!(ibv_ah_attr, static_rate),
        off!(ibv_ah_attr, is_global),
        off!(ibv_ah_attr, port_num),
        size!(ibv_qp_cap),
        off!(ibv_qp_cap, max_recv_wr),
        off!(ibv_qp_cap, max_inline_data),
        size!(ibv_qp_attr),
        off!(ibv_qp_attr, path_mtu),
        off!(ibv_qp_attr, qkey),
        off!(ibv_qp_attr, rq_psn),
        off!(ibv_qp_attr, sq_psn),
        off!(ibv_qp_attr, dest_qp_num),
        off!(ibv_qp_attr, qp_access_flags),
        off!(ibv_qp_attr, cap),
        off!(ibv_qp_attr, ah_attr),
        off!(ibv_qp_attr, alt_ah_attr),
        off!(ibv_qp_attr, pkey_index),
        off!(ibv_qp_attr, max_rd_atomic),
        off!(ibv_qp_attr, max_dest_rd_atomic),
        off!(ibv_qp_attr, min_rnr_timer),
        off!(ibv_qp_attr, port_num),
        off!(ibv_qp_attr, timeout),
        off!(ibv_qp_attr, retry_cnt),
        off!(ibv_qp_attr, rnr_retry),
        off!(ibv_qp_attr, rate_limit),
        size!(ibv_qp_init_attr),
        off!(ibv_qp_init_attr, send_cq),
        off!(ibv_qp_init_attr, srq),
        off!(ibv_qp_init_attr, cap),
        off!(ibv_qp_init_attr, qp_type),
        off!(ibv_qp_init_attr, sq_sig_all),
        size!(ibv_srq_attr),
        size!(ibv_srq_init_attr),
        off!(ibv_srq_init_attr, attr),
        size!(ibv_port_attr),
        off!(ibv_port_attr, gid_tbl_len),
        off!(ibv_port_attr, max_msg_sz),
        off!(ibv_port_attr, pkey_tbl_len),
        off!(ibv_port_attr, lid),
        off!(ibv_port_attr, active_width),
        off!(ibv_port_attr, phys_state),
        off!(ibv_port_attr, link_layer),
        off!(ibv_port_attr, port_cap_flags2),
        size!(ibv_device_attr),
        off!(ibv_device_attr, node_guid),
        off!(ibv_device_attr, max_mr_size),
        off!(ibv_device_attr, vendor_id),
        off!(ibv_device_attr, max_qp),
        off!(ibv_device_attr, max_qp_wr),
        off!(ibv_device_attr, device_cap_flags),
        off!(ibv_device_attr, max_cqe),
        off!(ibv_device_attr, max_qp_rd_atom),
        off!(ibv_device_attr, atomic_cap),
        off!(ibv_device_attr, max_srq_sge),
        off!(ibv_device_attr, max_pkeys),
        off!(ibv_device_attr, phys_port_cnt),
        off!(ibv_device_attr_ex, comp_mask),
        size!(ibv_cq_ex),
        off!(ibv_cq_ex, comp_mask),
        off!(ibv_cq_ex, status),
        off!(ibv_cq_ex, wr_id),
        off!(ibv_cq_ex, start_poll),
        off!(ibv_cq_ex, next_poll),
        off!(ibv_cq_ex, end_poll),
        off!(ibv_cq_ex, read_opcode),
        off!(ibv_cq_ex, read_byte_len),
        off!(ibv_cq_ex, read_imm_data),
        off!(ibv_cq_ex, read_qp_num),
        off!(ibv_cq_ex, read_src_qp),
        off!(ibv_cq_ex, read_wc_flags),
        off!(ibv_cq_ex, read_dlid_path_bits),
        off!(ibv_cq_ex, _unsupported => "read_completion_ts"),
        size!(ibv_cq_init_attr_ex),
        off!(ibv_cq_init_attr_ex, cq_context),
        off!(ibv_cq_init_attr_ex, channel),
        off!(ibv_cq_init_attr_ex, comp_vector),
        off!(ibv_cq_init_attr_ex, wc_flags),
        off!(ibv_cq_init_attr_ex, comp_mask),
        off!(ibv_cq_init_attr_ex, flags),
        off!(ibv_cq_init_attr_ex, parent_domain),
        size!(ibv_qp_ex),
        off!(ibv_qp_ex, comp_mask),
        off!(ibv_qp_ex, wr_id),
        off!(ibv_qp_ex, wr_flags),
        off!(ibv_qp_ex, wr_atomic_cmp_swp),
        off!(ibv_qp_ex, wr_atomic_fetch_add),
        off!(ibv_qp_ex, wr_rdma_read),
        off!(ibv_qp_ex, wr_rdma_write),
        off!(ibv_qp_ex, wr_rdma_write_imm),
        off!(ibv_qp_ex, wr_send),
        off!(ibv_qp_ex, wr_send_imm),
        off!(ibv_qp_ex, wr_set_ud_addr),
        off!(ibv_qp_ex, wr_set_inline_data),
        off!(ibv_qp_ex, wr_set_inline_data_list),
        off!(ibv_qp_ex, wr_set_sge),
        off!(ibv_qp_ex, wr_set_sge_list),
        off!(ibv_qp_ex, wr_start),
        off!(ibv_qp_ex, wr_complete),
        off!(ibv_qp_ex, wr_abort),
        off!(ibv_qp_ex, wr_atomic_write),
        size!(ibv_data_buf),
        off!(ibv_data_buf, length),
        size!(ibv_qp_init_attr_ex),
        off!(ibv_qp_init_attr_ex, comp_mask),
        off!(ibv_qp_init_attr_ex, pd),
        off!(ibv_qp_init_attr_ex, create_flags),
        off!(ibv_qp_init_attr_ex, rwq_ind_tbl),
        off!(ibv_qp_init_attr_ex, _rx_hash_conf => "rx_hash_conf"),
        off!(ibv_qp_init_attr_ex, source_qpn),
        off!(ibv_qp_init_attr_ex, send_ops_flags),
        size!(ibv_gid_entry),
        off!(ibv_gid_entry, gid_index),
        off!(ibv_gid_entry, port_num),
        off!(ibv_gid_entry, gid_type),
        off!(ibv_gid_entry, ndev_ifindex),
        ("sizeof(union ibv_gid)", size_of::<ibv_gid>()),
        ("_Alignof(union ibv_gid)", align_of::<ibv_gid>()),
        ("IBV_SYSFS_NAME_MAX", IBV_SYSFS_NAME_MAX),
        ("IBV_SYSFS_PATH_MAX", IBV_SYSFS_PATH_MAX),
        ("(size_t)__VERBS_ABI_IS_EXTENDED", VERBS_ABI_IS_EXTENDED),
    ];
    v.extend(val!(
        IBV_WR_RDMA_WRITE,
        IBV_WR_RDMA_WRITE_WITH_IMM,
        IBV_WR_SEND,
        IBV_WR_SEND_WITH_IMM,
        IBV_WR_RDMA_READ,
        IBV_WR_ATOMIC_CMP_AND_SWP,
        IBV_WR_ATOMIC_FETCH_AND_ADD,
        IBV_SEND_FENCE,
        IBV_SEND_SIGNALED,
        IBV_SEND_SOLICITED,
        IBV_SEND_INLINE,
        IBV_WC_SEND,
        IBV_WC_RDMA_WRITE,
        IBV_WC_RDMA_READ,
        IBV_WC_COMP_SWAP,
        IBV_WC_FETCH_ADD,
        IBV_WC_RECV,
        IBV_WC_RECV_RDMA_WITH_IMM,
        IBV_WC_GRH,
        IBV_WC_WITH_IMM,
        IBV_WC_SUCCESS,
        IBV_WC_LOC_LEN_ERR,
        IBV_WC_LOC_QP_OP_ERR,
        IBV_WC_LOC_PROT_ERR,
        IBV_WC_WR_FLUSH_ERR,
        IBV_WC_MW_BIND_ERR,
        IBV_WC_BAD_RESP_ERR,
        IBV_WC_LOC_ACCESS_ERR,
        IBV_WC_REM_INV_REQ_ERR,
        IBV_WC_REM_ACCESS_ERR,
        IBV_WC_REM_OP_ERR,
        IBV_WC_RETRY_EXC_ERR,
        IBV_WC_RNR_RETRY_EXC_ERR,
        IBV_WC_REM_INV_RD_REQ_ERR,
        IBV_WC_REM_ABORT_ERR,
        IBV_WC_GENERAL_ERR,
        IBV_QPS_RESET,
        IBV_QPS_INIT,
        IBV_QPS_RTR,
        IBV_QPS_RTS,
        IBV_QPS_SQD,
        IBV_QPS_SQE,
        IBV_QPS_ERR,
        IBV_QPT_RC,
        IBV_QPT_UC,
        IBV_QPT_UD,
        IBV_QP_STATE,
        IBV_QP_CUR_STATE,
        IBV_QP_ACCESS_FLAGS,
        IBV_QP_PKEY_INDEX,
        IBV_QP_PORT,
        IBV_QP_QKEY,
        IBV_QP_AV,
        IBV_QP_PATH_MTU,
        IBV_QP_TIMEOUT,
        IBV_QP_RETRY_CNT,
        IBV_QP_RNR_RETRY,
        IBV_QP_RQ_PSN,
        IBV_QP_MAX_QP_RD_ATOMIC,
        IBV_QP_ALT_PATH,
        IBV_QP_MIN_RNR_TIMER,
        IBV_QP_SQ_PSN,
        IBV_QP_MAX_DEST_RD_ATOMIC,
        IBV_QP_CAP,
        IBV_QP_DEST_QPN,
        IBV_ACCESS_LOCAL_WRITE,
        IBV_ACCESS_REMOTE_WRITE,
        IBV_ACCESS_REMOTE_READ,
        IBV_ACCESS_REMOTE_ATOMIC,
        IBV_ACCESS_MW_BIND,
        IBV_MTU_256,
        IBV_MTU_4096,
        IBV_PORT_ACTIVE,
        IBV_LINK_LAYER_ETHERNET,
        IBV_NODE_CA,
        IBV_TRANSPORT_IB,
        IBV_ATOMIC_HCA,
        IBV_GID_TYPE_ROCE_V2,
        IBV_FORK_UNNEEDED,
        IBV_QP_INIT_ATTR_PD,
        IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        IBV_QP_EX_WITH_RDMA_WRITE,
        IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        IBV_QP_EX_WITH_SEND,
        IBV_QP_EX_WITH_SEND_WITH_IMM,
        IBV_QP_EX_WITH_RDMA_READ,
        IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
        IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        IBV_WC_STANDARD_FLAGS,
        IBV_CQ_INIT_ATTR_MASK_FLAGS,
        IBV_CQ_INIT_ATTR_MASK_PD,
        IBV_CREATE_CQ_ATTR_SINGLE_THREADED,
    ));
    v
}
