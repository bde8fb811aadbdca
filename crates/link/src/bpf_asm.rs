//! A small eBPF assembler: instructions in order, jump labels resolved at the end
//! (encoding: Documentation/bpf/standardization/instruction-set.rst), and the one
//! sequence both of weft's XDP programs end with, the redirect to the port's
//! `AF_XDP` socket. Used by [`crate::afxdp`] (the plain redirect program) and
//! [`crate::xdp_fwd`] (the forwarding fast path, whose slow path is that redirect).
#![forbid(unsafe_code)]

use crate::sys::bpf::{Insn, BPF_FUNC_REDIRECT_MAP, BPF_PSEUDO_MAP_FD};
use crate::xdp_fwd::XDP_PASS;
use std::os::fd::{AsRawFd, BorrowedFd};

// Opcodes (class | size/op | source).
const LDX_B: u8 = 0x71;
const LDX_H: u8 = 0x69;
const LDX_W: u8 = 0x61;
const LDX_DW: u8 = 0x79;
const STX_B: u8 = 0x73;
const STX_H: u8 = 0x6b;
const STX_W: u8 = 0x63;
const STX_DW: u8 = 0x7b;
const ST_W: u8 = 0x62;
const ADD64_K: u8 = 0x07;
const ADD64_X: u8 = 0x0f;
const SUB64_K: u8 = 0x17;
const SUB64_X: u8 = 0x1f;
const AND64_K: u8 = 0x57;
const RSH64_K: u8 = 0x77;
const MOV64_K: u8 = 0xb7;
const MOV64_X: u8 = 0xbf;
/// `BPF_ALU | BPF_END | BPF_TO_BE`: to big-endian, i.e. network to host order on a
/// little-endian machine and nothing on a big-endian one.
const BE: u8 = 0xdc;
const LD_IMM_DW: u8 = 0x18;
const CALL: u8 = 0x85;
const EXIT: u8 = 0x95;

/// A conditional or unconditional jump (`BPF_JMP`/`BPF_JMP32` class with its op).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Jmp {
    /// ==, 64-bit.
    Eq,
    /// !=, 64-bit.
    Ne,
    /// > unsigned, 64-bit.
    Gt,
    /// >= unsigned, 64-bit.
    Ge,
    /// <= unsigned, 64-bit.
    Le,
    /// != on the low 32 bits (`BPF_JMP32`), so a 32-bit immediate is not
    /// sign-extended against a zero-extended load.
    Ne32,
}

impl Jmp {
    /// The opcode with an immediate operand (`BPF_K`); `| 0x08` is the register form.
    const fn code(self) -> u8 {
        match self {
            Jmp::Eq => 0x15,
            Jmp::Ne => 0x55,
            Jmp::Gt => 0x25,
            Jmp::Ge => 0x35,
            Jmp::Le => 0xb5,
            Jmp::Ne32 => 0x56,
        }
    }
}

/// A jump target of [`Asm`], bound to an instruction with [`Asm::bind`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Label(usize);

/// Why [`Asm::finish`] failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum AsmError {
    /// A jump to a label never bound.
    Unbound(usize),
    /// A jump farther than a 16-bit offset reaches.
    TooFar(usize),
}

impl std::fmt::Display for AsmError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AsmError::Unbound(i) => write!(f, "jump at {i} to an unbound label"),
            AsmError::TooFar(i) => write!(f, "jump at {i} out of 16-bit range"),
        }
    }
}

impl std::error::Error for AsmError {}

/// An eBPF assembler: instructions in order, jumps to labels resolved at
/// [`Asm::finish`] (offsets count from the instruction after the jump).
#[derive(Debug, Default)]
pub(crate) struct Asm {
    insns: Vec<Insn>,
    labels: Vec<Option<usize>>,
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    /// An empty program.
    pub(crate) fn new() -> Asm {
        Asm::default()
    }

    fn push(&mut self, code: u8, dst: u8, src: u8, off: i16, imm: i32) -> &mut Asm {
        self.insns.push(Insn::new(code, dst, src, off, imm));
        self
    }

    /// A new, unbound label.
    pub(crate) fn label(&mut self) -> Label {
        self.labels.push(None);
        Label(self.labels.len() - 1)
    }

    /// Bind `l` to the next instruction.
    pub(crate) fn bind(&mut self, l: Label) -> &mut Asm {
        if let Some(slot) = self.labels.get_mut(l.0) {
            *slot = Some(self.insns.len());
        }
        self
    }

    /// `dst = *(size *)(src + off)`, `size` 1, 2, 4 or 8 bytes (zero-extended).
    pub(crate) fn load(&mut self, size: u8, dst: u8, src: u8, off: i16) -> &mut Asm {
        let code = match size {
            1 => LDX_B,
            2 => LDX_H,
            4 => LDX_W,
            _ => LDX_DW,
        };
        self.push(code, dst, src, off, 0)
    }

    /// `*(size *)(dst + off) = src`.
    pub(crate) fn store(&mut self, size: u8, dst: u8, off: i16, src: u8) -> &mut Asm {
        let code = match size {
            1 => STX_B,
            2 => STX_H,
            4 => STX_W,
            _ => STX_DW,
        };
        self.push(code, dst, src, off, 0)
    }

    /// `*(u32 *)(dst + off) = imm`.
    pub(crate) fn store_imm32(&mut self, dst: u8, off: i16, imm: i32) -> &mut Asm {
        self.push(ST_W, dst, 0, off, imm)
    }

    /// `dst = imm` (64-bit, sign-extended).
    pub(crate) fn mov_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(MOV64_K, dst, 0, 0, imm)
    }

    /// `dst = src`.
    pub(crate) fn mov(&mut self, dst: u8, src: u8) -> &mut Asm {
        self.push(MOV64_X, dst, src, 0, 0)
    }

    /// `dst += imm`.
    pub(crate) fn add_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(ADD64_K, dst, 0, 0, imm)
    }

    /// `dst += src`.
    pub(crate) fn add(&mut self, dst: u8, src: u8) -> &mut Asm {
        self.push(ADD64_X, dst, src, 0, 0)
    }

    /// `dst -= imm`.
    pub(crate) fn sub_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(SUB64_K, dst, 0, 0, imm)
    }

    /// `dst -= src`.
    pub(crate) fn sub(&mut self, dst: u8, src: u8) -> &mut Asm {
        self.push(SUB64_X, dst, src, 0, 0)
    }

    /// `dst &= imm`.
    pub(crate) fn and_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(AND64_K, dst, 0, 0, imm)
    }

    /// `dst >>= imm` (logical).
    pub(crate) fn rsh_imm(&mut self, dst: u8, imm: i32) -> &mut Asm {
        self.push(RSH64_K, dst, 0, 0, imm)
    }

    /// `dst = be16(dst)`: a 16-bit field loaded from the wire, in host order.
    pub(crate) fn be16(&mut self, dst: u8) -> &mut Asm {
        self.push(BE, dst, 0, 0, 16)
    }

    /// `dst = map` (`ld_imm64` with `BPF_PSEUDO_MAP_FD`: the kernel puts the map in).
    pub(crate) fn ld_map(&mut self, dst: u8, map: BorrowedFd<'_>) -> &mut Asm {
        self.push(LD_IMM_DW, dst, BPF_PSEUDO_MAP_FD, 0, map.as_raw_fd());
        self.push(0, 0, 0, 0, 0)
    }

    /// `call helper`.
    pub(crate) fn call(&mut self, helper: i32) -> &mut Asm {
        self.push(CALL, 0, 0, 0, helper)
    }

    /// `exit` (returns r0).
    pub(crate) fn exit(&mut self) -> &mut Asm {
        self.push(EXIT, 0, 0, 0, 0)
    }

    /// `if dst <op> imm goto to`.
    pub(crate) fn jmp_imm(&mut self, op: Jmp, dst: u8, imm: i32, to: Label) -> &mut Asm {
        self.fixups.push((self.insns.len(), to));
        self.push(op.code(), dst, 0, 0, imm)
    }

    /// `if dst <op> src goto to`.
    pub(crate) fn jmp_reg(&mut self, op: Jmp, dst: u8, src: u8, to: Label) -> &mut Asm {
        self.fixups.push((self.insns.len(), to));
        self.push(op.code() | 0x08, dst, src, 0, 0)
    }

    /// The instructions with every jump resolved.
    pub(crate) fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        for &(at, l) in &self.fixups {
            let target = self
                .labels
                .get(l.0)
                .copied()
                .flatten()
                .ok_or(AsmError::Unbound(at))?;
            let off = target as i64 - (at as i64 + 1);
            let off = i16::try_from(off).map_err(|_| AsmError::TooFar(at))?;
            if let Some(i) = self.insns.get_mut(at) {
                i.off = off;
            }
        }
        Ok(self.insns)
    }
}

/// `struct xdp_md` field offsets.
const XDP_MD_DATA: i16 = 0;
const XDP_MD_DATA_END: i16 = 4;
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;

/// Append the redirect of the frame whose `struct xdp_md` is in register `ctx` to
/// the `AF_XDP` socket of its receive queue in the XSKMAP `xsks`; a frame longer than
/// `room` (what a UMEM chunk holds), or one on a queue with no socket, goes to the
/// kernel's stack (`XDP_PASS`). Clobbers r0-r3 (and r1 even when `ctx` is r1, after
/// its last read). Ends the program's path: both branches exit.
///
/// ```text
/// r2 = *(u32 *)(ctx + 0)     ; ctx->data
/// r3 = *(u32 *)(ctx + 4)     ; ctx->data_end
/// r3 -= r2                   ; the frame's length
/// if r3 > room goto pass
/// r2 = *(u32 *)(ctx + 16)    ; ctx->rx_queue_index
/// r1 = xsks ll               ; ld_imm64, src = BPF_PSEUDO_MAP_FD: the kernel swaps in the map
/// r3 = XDP_PASS              ; no socket on this queue: the frame goes to the stack
/// call bpf_redirect_map
/// exit                       ; r0 = XDP_REDIRECT, or XDP_PASS
/// pass: r0 = XDP_PASS
/// exit
/// ```
pub(crate) fn redirect_to_xsk(a: &mut Asm, ctx: u8, xsks: BorrowedFd<'_>, room: u32) {
    let pass = a.label();
    a.load(4, 2, ctx, XDP_MD_DATA)
        .load(4, 3, ctx, XDP_MD_DATA_END)
        .sub(3, 2);
    a.jmp_imm(Jmp::Gt, 3, room as i32, pass);
    a.load(4, 2, ctx, XDP_MD_RX_QUEUE_INDEX);
    a.ld_map(1, xsks);
    a.mov_imm(3, XDP_PASS as i32)
        .call(BPF_FUNC_REDIRECT_MAP)
        .exit();
    a.bind(pass).mov_imm(0, XDP_PASS as i32).exit();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_resolve_to_offsets_from_the_next_instruction() {
        let mut a = Asm::new();
        let end = a.label();
        let top = a.label();
        a.bind(top);
        a.mov_imm(0, 1); // 0
        a.jmp_imm(Jmp::Eq, 0, 0, end); // 1 → 4: off 2
        a.jmp_reg(Jmp::Gt, 1, 2, top); // 2 → 0: off -3
        a.jmp_imm(Jmp::Ne, 0, 0, end); // 3 → 4: off 0
        a.bind(end).exit(); // 4
        let p = a.finish().expect("finish");
        assert_eq!(p.len(), 5);
        assert_eq!((p[1].code, p[1].off), (0x15, 2));
        assert_eq!((p[2].code, p[2].regs, p[2].off), (0x2d, 0x21, -3));
        assert_eq!((p[3].code, p[3].off), (0x55, 0));
        assert_eq!(p[4].code, 0x95);
    }

    #[test]
    fn an_unbound_label_is_an_error_not_a_wild_jump() {
        let mut a = Asm::new();
        let l = a.label();
        a.jmp_imm(Jmp::Ne, 1, 0, l).exit();
        assert_eq!(a.finish().err(), Some(AsmError::Unbound(0)));
    }

    #[test]
    fn encodings_match_the_instruction_set() {
        let mut a = Asm::new();
        a.load(2, 3, 7, 16)
            .be16(3)
            .store_imm32(10, -8, 32)
            .and_imm(2, 0xffff);
        a.jmp_imm(Jmp::Ne32, 2, -1, Label(0));
        let l = a.label();
        a.bind(l);
        let p = a.finish().expect("finish");
        assert_eq!((p[0].code, p[0].regs, p[0].off), (0x69, 0x73, 16));
        assert_eq!((p[1].code, p[1].imm), (0xdc, 16));
        assert_eq!(
            (p[2].code, p[2].regs, p[2].off, p[2].imm),
            (0x62, 0x0a, -8, 32)
        );
        assert_eq!((p[3].code, p[3].imm), (0x57, 0xffff));
        assert_eq!(p[4].code, 0x56);
    }
}
