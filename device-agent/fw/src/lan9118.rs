//! A small driver for the SMSC LAN9118 Ethernet controller that QEMU's `mps3-an547` puts at
//! 0x4140_0000 (the board has a LAN9220, its software-compatible sibling), polled, as smoltcp's
//! [`phy::Device`].
//!
//! | offset | register      | used for                                                          |
//! |--------|---------------|-------------------------------------------------------------------|
//! | 0x00   | RX data FIFO  | a received frame, 32-bit words, little-endian, then its CRC        |
//! | 0x20   | TX data FIFO  | TX command A (size, first/last segment), command B (length), data |
//! | 0x40   | RX status FIFO| one word per frame: length incl. CRC in bits 29:16, error bit 15  |
//! | 0x48   | TX status FIFO| one word per sent frame (popped, never read)                      |
//! | 0x58   | INT_STS       | cleared at start                                                   |
//! | 0x5C   | INT_EN        | 0: the driver polls                                                |
//! | 0x64   | BYTE_TEST     | 0x8765_4321: the chip is there and the bus is 32-bit               |
//! | 0x70   | TX_CFG        | TX_ON, TXSAO (the TX status FIFO may overrun)                      |
//! | 0x74   | HW_CFG        | SRST (soft reset)                                                  |
//! | 0x7C   | RX_FIFO_INF   | frames waiting (bits 23:16)                                        |
//! | 0x80   | TX_FIFO_INF   | free TX data bytes (15:0), TX statuses waiting (23:16)            |
//! | 0x84   | PMT_CTRL      | READY after reset                                                  |
//! | 0xA4/8 | MAC_CSR_CMD/DATA | the MAC's own registers, indirectly: MAC_CR (RXEN, TXEN, full duplex, no promiscuous mode), ADDRH/ADDRL (the MAC address the EEPROM loaded) |
use smoltcp::phy::{self, DeviceCapabilities, Medium};
use smoltcp::time::Instant;

/// Where the AN547 maps the controller.
pub const BASE: usize = 0x4140_0000;
/// Largest Ethernet frame without its CRC.
const FRAME: usize = 1514;

const RX_DATA: usize = 0x00;
const TX_DATA: usize = 0x20;
const RX_STATUS: usize = 0x40;
const TX_STATUS: usize = 0x48;
const INT_STS: usize = 0x58;
const INT_EN: usize = 0x5C;
const BYTE_TEST: usize = 0x64;
const TX_CFG: usize = 0x70;
const HW_CFG: usize = 0x74;
const RX_FIFO_INF: usize = 0x7C;
const TX_FIFO_INF: usize = 0x80;
const PMT_CTRL: usize = 0x84;
const MAC_CSR_CMD: usize = 0xA4;
const MAC_CSR_DATA: usize = 0xA8;

const MAC_CR: u32 = 1;
const MAC_ADDRH: u32 = 2;
const MAC_ADDRL: u32 = 3;

const CSR_BUSY: u32 = 1 << 31;
const CSR_READ: u32 = 1 << 30;
const MAC_CR_FDPX: u32 = 1 << 20;
const MAC_CR_TXEN: u32 = 1 << 3;
const MAC_CR_RXEN: u32 = 1 << 2;
const TX_CFG_TXSAO: u32 = 1 << 2;
const TX_CFG_TX_ON: u32 = 1 << 1;
const HW_CFG_SRST: u32 = 1;
const PMT_READY: u32 = 1;
const TX_CMD_A_FIRST: u32 = 1 << 13;
const TX_CMD_A_LAST: u32 = 1 << 12;
const RX_STS_ERROR: u32 = 1 << 15;

/// Bounds every wait on the chip (QEMU's completes at once; a real one in microseconds).
const SPIN: u32 = 100_000;

/// The register block.
#[derive(Debug, Clone, Copy)]
struct Regs(usize);

impl Regs {
    fn read(self, off: usize) -> u32 {
        // SAFETY: `self.0 + off` is a register of the LAN9118's 256-byte block (the offsets are
        // the constants above); reading it has only the device effects the driver intends.
        unsafe { core::ptr::read_volatile((self.0 + off) as *const u32) }
    }

    fn write(self, off: usize, v: u32) {
        // SAFETY: as in `read`.
        unsafe { core::ptr::write_volatile((self.0 + off) as *mut u32, v) }
    }

    fn mac_wait(self) -> Result<(), Error> {
        (0..SPIN)
            .find(|_| self.read(MAC_CSR_CMD) & CSR_BUSY == 0)
            .map(|_| ())
            .ok_or(Error::MacBusy)
    }

    fn mac_read(self, reg: u32) -> Result<u32, Error> {
        self.mac_wait()?;
        self.write(MAC_CSR_CMD, CSR_BUSY | CSR_READ | reg);
        self.mac_wait()?;
        Ok(self.read(MAC_CSR_DATA))
    }

    fn mac_write(self, reg: u32, v: u32) -> Result<(), Error> {
        self.mac_wait()?;
        self.write(MAC_CSR_DATA, v);
        self.write(MAC_CSR_CMD, CSR_BUSY | reg);
        self.mac_wait()
    }
}

/// Why the controller could not be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// BYTE_TEST did not read 0x8765_4321: no LAN9118 at [`BASE`].
    NotFound(u32),
    /// The soft reset did not finish.
    ResetTimeout,
    /// The MAC's CSR interface stayed busy.
    MacBusy,
}

/// The controller, started.
pub struct Lan9118 {
    regs: Regs,
    mac: [u8; 6],
    rx: [u8; FRAME + 8],
    tx: [u8; FRAME],
    /// Frames received and sent, for the log.
    pub frames: (u32, u32),
}

impl Lan9118 {
    /// Resets the controller at [`BASE`] and enables its MAC for this station's address only
    /// (and broadcast).
    pub fn start() -> Result<Self, Error> {
        let regs = Regs(BASE);
        let test = regs.read(BYTE_TEST);
        if test != 0x8765_4321 {
            return Err(Error::NotFound(test));
        }
        regs.write(HW_CFG, HW_CFG_SRST);
        (0..SPIN)
            .find(|_| regs.read(HW_CFG) & HW_CFG_SRST == 0 && regs.read(PMT_CTRL) & PMT_READY != 0)
            .ok_or(Error::ResetTimeout)?;
        regs.write(INT_EN, 0);
        regs.write(INT_STS, u32::MAX);
        let lo = regs.mac_read(MAC_ADDRL)?.to_le_bytes();
        let hi = regs.mac_read(MAC_ADDRH)?.to_le_bytes();
        let mac = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1]];
        regs.write(TX_CFG, TX_CFG_TX_ON | TX_CFG_TXSAO);
        regs.mac_write(MAC_CR, MAC_CR_TXEN | MAC_CR_RXEN | MAC_CR_FDPX)?;
        Ok(Self {
            regs,
            mac,
            rx: [0; FRAME + 8],
            tx: [0; FRAME],
            frames: (0, 0),
        })
    }

    /// The station address (QEMU's, from the EEPROM).
    pub fn mac(&self) -> [u8; 6] {
        self.mac
    }

    /// A frame is waiting in the RX FIFO.
    pub fn rx_pending(&self) -> bool {
        (self.regs.read(RX_FIFO_INF) >> 16) & 0xFF != 0
    }

    /// Pops the next good frame into `self.rx`; its length without the CRC.
    fn pop_frame(&mut self) -> Option<usize> {
        while self.rx_pending() {
            let status = self.regs.read(RX_STATUS);
            let len = ((status >> 16) & 0x3FFF) as usize;
            let words = len.div_ceil(4);
            let keep = status & RX_STS_ERROR == 0 && (14 + 4..=FRAME + 4).contains(&len);
            for i in 0..words {
                let w = self.regs.read(RX_DATA).to_le_bytes();
                if keep {
                    self.rx[4 * i..4 * i + 4].copy_from_slice(&w);
                }
            }
            if keep {
                self.frames.0 += 1;
                return Some(len - 4);
            }
        }
        None
    }
}

fn transmit(regs: Regs, frame: &[u8]) {
    let len = frame.len() as u32;
    // The data FIFO holds several frames; wait (bounded) for room for this one.
    let _ = (0..SPIN).find(|_| regs.read(TX_FIFO_INF) & 0xFFFF >= len + 8);
    regs.write(TX_DATA, TX_CMD_A_FIRST | TX_CMD_A_LAST | len);
    regs.write(TX_DATA, len);
    for chunk in frame.chunks(4) {
        let mut w = [0u8; 4];
        w[..chunk.len()].copy_from_slice(chunk);
        regs.write(TX_DATA, u32::from_le_bytes(w));
    }
    while (regs.read(TX_FIFO_INF) >> 16) & 0xFF != 0 {
        let _ = regs.read(TX_STATUS);
    }
}

/// A received frame.
pub struct Rx<'a>(&'a [u8]);

impl phy::RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

/// Room for one frame to send.
pub struct Tx<'a> {
    regs: Regs,
    buf: &'a mut [u8; FRAME],
    sent: &'a mut u32,
}

impl phy::TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let len = len.min(FRAME);
        let r = f(&mut self.buf[..len]);
        transmit(self.regs, &self.buf[..len]);
        *self.sent += 1;
        r
    }
}

impl phy::Device for Lan9118 {
    type RxToken<'a> = Rx<'a>;
    type TxToken<'a> = Tx<'a>;

    fn receive(&mut self, _now: Instant) -> Option<(Rx<'_>, Tx<'_>)> {
        let len = self.pop_frame()?;
        let Self {
            regs,
            rx,
            tx,
            frames,
            ..
        } = self;
        Some((
            Rx(&rx[..len]),
            Tx {
                regs: *regs,
                buf: tx,
                sent: &mut frames.1,
            },
        ))
    }

    fn transmit(&mut self, _now: Instant) -> Option<Tx<'_>> {
        Some(Tx {
            regs: self.regs,
            buf: &mut self.tx,
            sent: &mut self.frames.1,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = FRAME;
        caps
    }
}
