//! The NPU of the QEMU board: there is none (QEMU emulates no Ethos-U55). The registers are
//! remembered ([`RecordingNpu`]); a self-test with a golden input runs nothing and says so, in
//! the log: "self-test skipped: no NPU on this board". The pack is then confirmed on the
//! firmware's own checks alone (there are none here), which the figures state.
use cortex_m_semihosting::hprintln;
use device_agent::{Npu, NpuRegisters, RecordingNpu, SelfTestResult};

/// The board's stand-in NPU.
#[derive(Debug, Default)]
pub struct BoardNpu(pub RecordingNpu);

impl Npu for BoardNpu {
    fn program(&mut self, regs: &NpuRegisters) {
        self.0.program(regs);
    }

    fn unbind(&mut self) {
        self.0.unbind();
    }

    fn self_test(&mut self, regs: &NpuRegisters, golden: Option<&[u8]>) -> SelfTestResult {
        if let Some(input) = golden {
            hprintln!(
                "self-test skipped: no NPU on this board (golden input of {} bytes not run)",
                input.len()
            );
        }
        // No inference: the recording NPU answers `None`.
        self.0.self_test(regs, None)
    }
}
