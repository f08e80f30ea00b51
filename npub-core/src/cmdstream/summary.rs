//! What a verified stream does, in a fixed-size `Copy` value (a device can keep or report it).
use core::fmt;

use super::opcodes::Operation;
use super::operand::Target;
use crate::format::MAX_BASE_POINTERS;

/// A byte range `[start, end)` inside a region (or SHRAM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(serde::Serialize))]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// The smallest span covering both.
    pub const fn union(self, other: Span) -> Span {
        Span {
            start: if self.start < other.start {
                self.start
            } else {
                other.start
            },
            end: if self.end > other.end {
                self.end
            } else {
                other.end
            },
        }
    }

    /// Bytes covered.
    pub const fn len(self) -> u32 {
        self.end - self.start
    }

    /// True when it covers nothing (never the case in a summary).
    pub const fn is_empty(self) -> bool {
        self.end == self.start
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.start, self.end)
    }
}

/// How many of each memory-touching operation the stream runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[cfg_attr(feature = "std", derive(serde::Serialize))]
pub struct OpCounts {
    /// `NPU_OP_CONV` (fully connected included).
    pub conv: u32,
    /// `NPU_OP_DEPTHWISE`.
    pub depthwise: u32,
    /// `NPU_OP_POOL`.
    pub pool: u32,
    /// `NPU_OP_ELEMENTWISE`.
    pub elementwise: u32,
    /// `NPU_OP_DMA_START`.
    pub dma_start: u32,
}

impl OpCounts {
    /// The count for `op`.
    pub const fn get(&self, op: Operation) -> u32 {
        match op {
            Operation::Conv => self.conv,
            Operation::Depthwise => self.depthwise,
            Operation::Pool => self.pool,
            Operation::Elementwise => self.elementwise,
            Operation::DmaStart => self.dma_start,
        }
    }

    pub(crate) fn count(&mut self, op: Operation) {
        let n = match op {
            Operation::Conv => &mut self.conv,
            Operation::Depthwise => &mut self.depthwise,
            Operation::Pool => &mut self.pool,
            Operation::Elementwise => &mut self.elementwise,
            Operation::DmaStart => &mut self.dma_start,
        };
        // At most one per 4-byte word of a u32-long stream: cannot overflow.
        *n += 1;
    }

    /// All operations that touch memory.
    pub const fn total(&self) -> u32 {
        self.conv + self.depthwise + self.pool + self.elementwise + self.dma_start
    }
}

/// The result of [`super::verify`]: what the stream does and where it reaches.
///
/// Spans cover only bytes some operation reads or writes (empty ranges — a zero length — touch
/// nothing and are not counted). On Vela's output the span of every used region equals the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "std", derive(serde::Serialize))]
pub struct StreamSummary {
    /// Commands decoded, cmd0 and cmd1 alike, STOP included.
    pub commands: u32,
    /// Operations by kind.
    pub ops: OpCounts,
    /// Bit *n* set: the stream touches region *n* (BASEP*n*).
    pub regions_used: u8,
    /// Per region (index = BASEP*n*): the smallest span covering every access, `None` if unused.
    pub spans: [Option<Span>; MAX_BASE_POINTERS],
    /// The same for the NPU's internal SHRAM (DMA with the "internal" bit, e.g. LUT loads).
    pub shram: Option<Span>,
}

impl Default for StreamSummary {
    fn default() -> Self {
        Self::new()
    }
}

impl StreamSummary {
    /// Nothing seen yet.
    pub const fn new() -> Self {
        Self {
            commands: 0,
            ops: OpCounts {
                conv: 0,
                depthwise: 0,
                pool: 0,
                elementwise: 0,
                dma_start: 0,
            },
            regions_used: 0,
            spans: [None; MAX_BASE_POINTERS],
            shram: None,
        }
    }

    /// The accessed span of region `index`, `None` if the stream does not touch it.
    pub fn span(&self, index: usize) -> Option<Span> {
        self.spans.get(index).copied().flatten()
    }

    /// Indices of the regions the stream touches, ascending.
    pub fn used_regions(&self) -> impl Iterator<Item = usize> + '_ {
        (0..MAX_BASE_POINTERS).filter(|&i| self.regions_used & (1 << i) != 0)
    }

    /// Adds a non-empty access (already checked to be inside `target`).
    pub(crate) fn record(&mut self, target: Target, span: Span) {
        let slot = match target {
            Target::Region(r) => {
                self.regions_used |= 1 << r;
                &mut self.spans[usize::from(r)]
            }
            Target::Shram => &mut self.shram,
        };
        *slot = Some(match *slot {
            Some(s) => s.union(span),
            None => span,
        });
    }
}

impl fmt::Display for StreamSummary {
    /// One line: `191 commands: 3 CONV, 1 DEPTHWISE, 3 DMA_START; region 0 [0, 134976), region 1 [0, 19424)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} commands:", self.commands)?;
        let mut first = true;
        for op in [
            Operation::Conv,
            Operation::Depthwise,
            Operation::Pool,
            Operation::Elementwise,
            Operation::DmaStart,
        ] {
            let n = self.ops.get(op);
            if n > 0 {
                write!(f, "{} {n} {op}", if first { "" } else { "," })?;
                first = false;
            }
        }
        if first {
            f.write_str(" no operations")?;
        }
        let mut sep = ";";
        for i in self.used_regions() {
            if let Some(s) = self.span(i) {
                write!(f, "{sep} region {i} {s}")?;
                sep = ",";
            }
        }
        if let Some(s) = self.shram {
            write!(f, "{sep} SHRAM {s}")?;
        }
        Ok(())
    }
}
