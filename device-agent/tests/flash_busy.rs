//! The running model and the update share one NOR chip: a simulated inference task reads the
//! active slot on its own thread while the agent installs an upgrade into the other slot, and the
//! NOR model refuses a read while it erases or programs (as OSPI NOR does: the chip cannot be
//! read while it is busy). Through [`BusyFlash`], whose `begin` pauses the inference task and
//! `end` lets it run again, no read ever meets a busy chip, every erase is one sector and every
//! `begin` has its `end`; without the hooks the first program meets a read (the control: the
//! test can fail).
mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::thread;
use std::time::Duration;

use common::*;
use device_agent::{BusyFlash, FlashBusy, FlashOp, Mapped, Poll, RecordingNpu, Slot};
use embedded_storage::nor_flash::{ErrorType, NorFlash, ReadNorFlash};

/// The chip's busy line and the inference task's view of it.
#[derive(Default)]
struct Chip {
    /// Held for writing while the chip erases or programs; a read takes it for reading.
    bus: RwLock<()>,
    /// Reads of the active slot that found the chip idle, and those that found it busy.
    reads: AtomicU64,
    collisions: AtomicU64,
    /// The control: the first operation waits (holding the bus) until a read has met it.
    hold_until_collision: AtomicBool,
    collided: (Mutex<bool>, Condvar),
    /// The hooks' handshake: `pause` asked, `paused` acknowledged by the inference task.
    pause: Mutex<(bool, bool)>,
    pause_changed: Condvar,
    /// The inference task runs (set before it is spawned); `stop` asks it to end.
    running: AtomicBool,
    stop: AtomicBool,
}

/// The NOR model: the emulated NOR, busy (the bus held) for the length of each erase and program.
struct SharedNor {
    nor: Flash,
    chip: Arc<Chip>,
}

impl SharedNor {
    fn busy<T>(&mut self, op: impl FnOnce(&mut Flash) -> T) -> T {
        let _busy = self.chip.bus.write().unwrap();
        if self.chip.hold_until_collision.swap(false, Ordering::SeqCst) {
            let (lock, cv) = &self.chip.collided;
            let mut met = lock.lock().unwrap();
            while !*met {
                // Bounded, so that a broken control ends instead of hanging.
                let (m, timeout) = cv.wait_timeout(met, Duration::from_secs(30)).unwrap();
                met = m;
                if timeout.timed_out() {
                    break;
                }
            }
        }
        op(&mut self.nor)
    }
}

impl ErrorType for SharedNor {
    type Error = <Flash as ErrorType>::Error;
}

impl ReadNorFlash for SharedNor {
    const READ_SIZE: usize = 1;

    fn read(&mut self, offset: u32, bytes: &mut [u8]) -> Result<(), Self::Error> {
        self.nor.read(offset, bytes)
    }

    fn capacity(&self) -> usize {
        self.nor.capacity()
    }
}

impl NorFlash for SharedNor {
    const WRITE_SIZE: usize = WRITE;
    const ERASE_SIZE: usize = ERASE;

    fn erase(&mut self, from: u32, to: u32) -> Result<(), Self::Error> {
        self.busy(|nor| nor.erase(from, to))
    }

    fn write(&mut self, offset: u32, bytes: &[u8]) -> Result<(), Self::Error> {
        self.busy(|nor| nor.write(offset, bytes))
    }
}

impl Mapped for SharedNor {
    fn mapped(&self) -> &[u8] {
        self.nor.mapped()
    }

    fn invalidate(&mut self) {
        self.nor.invalidate();
    }
}

/// The inference task: reads the active slot in a loop, between the pauses the hooks ask for.
fn inference(chip: Arc<Chip>) {
    while !chip.stop.load(Ordering::SeqCst) {
        {
            let mut p = chip.pause.lock().unwrap();
            if p.0 {
                p.1 = true;
                chip.pause_changed.notify_all();
                while p.0 && !chip.stop.load(Ordering::SeqCst) {
                    p = chip
                        .pause_changed
                        .wait_timeout(p, Duration::from_millis(50))
                        .unwrap()
                        .0;
                }
                p.1 = false;
                continue;
            }
        }
        match chip.bus.try_read() {
            Ok(_reading) => {
                chip.reads.fetch_add(1, Ordering::SeqCst);
            }
            Err(_) => {
                chip.collisions.fetch_add(1, Ordering::SeqCst);
                let (lock, cv) = &chip.collided;
                *lock.lock().unwrap() = true;
                cv.notify_all();
            }
        }
        thread::yield_now();
    }
}

/// The firmware's hooks: `begin` returns once the inference task is paused.
struct Hooks {
    chip: Arc<Chip>,
    open: Option<(FlashOp, u32, u32)>,
    erases: Vec<u32>,
    programs: u64,
}

impl FlashBusy for Hooks {
    fn begin(&mut self, op: FlashOp, offset: u32, len: u32) {
        assert_eq!(self.open, None, "begin inside another busy window");
        self.open = Some((op, offset, len));
        match op {
            FlashOp::Erase => self.erases.push(len),
            FlashOp::Program => self.programs += 1,
        }
        if !self.chip.running.load(Ordering::SeqCst) {
            return;
        }
        let mut p = self.chip.pause.lock().unwrap();
        p.0 = true;
        self.chip.pause_changed.notify_all();
        while !p.1 {
            p = self.chip.pause_changed.wait(p).unwrap();
        }
    }

    fn end(&mut self, op: FlashOp, offset: u32, len: u32) {
        assert_eq!(
            self.open.take(),
            Some((op, offset, len)),
            "end without its begin"
        );
        if !self.chip.running.load(Ordering::SeqCst) {
            return;
        }
        let reads = self.chip.reads.load(Ordering::SeqCst);
        {
            let mut p = self.chip.pause.lock().unwrap();
            p.0 = false;
            self.chip.pause_changed.notify_all();
        }
        // The firmware's inference window between two operations: let the task read once.
        for _ in 0..1_000_000 {
            if self.chip.reads.load(Ordering::SeqCst) > reads {
                break;
            }
            thread::yield_now();
        }
    }
}

/// Installs pack 1, then (with the inference task running on pack 1's slot) upgrades to pack 2.
/// Returns the upgrade's flash operations as the NOR counted them.
fn upgrade<F: NorFlash + Mapped>(
    wrap: impl FnOnce(SharedNor) -> F,
    unwrap: impl Fn(&F) -> u64,
    chip: &Arc<Chip>,
) -> u64 {
    let (a, b) = (small(), case("small_net_u55_256"));
    // small_net's 135,856 bytes: hundreds of programs and sector erases.
    let layout = layout(160 * 1024);
    let nor = SharedNor {
        nor: blank_flash(&layout),
        chip: Arc::clone(chip),
    };
    let mut agent = device_agent::Agent::open(wrap(nor), layout, device()).unwrap();
    let mut server = Server::default();
    let mut npu = RecordingNpu::default();
    let mut mem = vec![0u8; 64 * 1024];
    let mut arena = device_agent::Arena {
        bytes: &mut mem,
        bus_address: ARENA_BUS,
    };
    server.offer(&a.pack, 1);
    let first = agent.poll(&mut server, &mut npu, &mut arena, None);
    assert!(matches!(first, Ok(Poll::Installed(_))), "{first:?}");
    assert_eq!(agent.state().active(), Some(Slot::A));
    let before = unwrap(agent.flash());

    chip.running.store(true, Ordering::SeqCst);
    let task = {
        let chip = Arc::clone(chip);
        thread::spawn(move || inference(chip))
    };
    server.offer(&b.pack, 2);
    let second = agent.poll(&mut server, &mut npu, &mut arena, None);
    chip.stop.store(true, Ordering::SeqCst);
    chip.pause_changed.notify_all();
    task.join().unwrap();
    chip.running.store(false, Ordering::SeqCst);
    assert!(matches!(second, Ok(Poll::Installed(_))), "{second:?}");
    assert_eq!(agent.state().active(), Some(Slot::B));
    unwrap(agent.flash()) - before
}

#[test]
fn an_inference_task_never_reads_the_chip_while_the_agent_erases_or_programs_it() {
    let chip = Arc::new(Chip::default());
    let hooks = Hooks {
        chip: Arc::clone(&chip),
        open: None,
        erases: Vec::new(),
        programs: 0,
    };
    let ops = upgrade(
        |nor| BusyFlash {
            flash: nor,
            busy: hooks,
        },
        |f| f.flash.nor.ops(),
        &chip,
    );
    let (reads, collisions) = (
        chip.reads.load(Ordering::SeqCst),
        chip.collisions.load(Ordering::SeqCst),
    );
    println!(
        "upgrade: {ops} flash operations; inference read the chip {reads} times, {collisions} while busy"
    );
    assert_eq!(collisions, 0, "a read met the busy chip");
    assert!(reads > 0, "the inference task ran");
    assert!(ops > 0);
}

#[test]
fn every_erase_is_one_sector_between_its_begin_and_end() {
    let chip = Arc::new(Chip::default());
    let hooks = Hooks {
        chip: Arc::clone(&chip),
        open: None,
        erases: Vec::new(),
        programs: 0,
    };
    // Every operation the NOR counted went through one begin/end pair.
    let counted = Arc::new(Mutex::new((0u64, 0u64)));
    let out = Arc::clone(&counted);
    upgrade(
        |nor| BusyFlash {
            flash: nor,
            busy: hooks,
        },
        move |f| {
            assert_eq!(f.busy.open, None, "a window left open");
            assert!(f.busy.erases.iter().all(|&len| len == ERASE as u32));
            let hooked = f.busy.erases.len() as u64 + f.busy.programs;
            *out.lock().unwrap() = (hooked, f.flash.nor.ops());
            f.flash.nor.ops()
        },
        &chip,
    );
    let (hooked, ops) = *counted.lock().unwrap();
    assert_eq!(hooked, ops, "every erase and program between begin and end");
}

/// The control: the same upgrade without the hooks, the first operation held until a read meets
/// it. It does: the test above would see a read of a busy chip.
#[test]
fn without_the_hooks_a_read_meets_the_busy_chip() {
    let chip = Arc::new(Chip::default());
    chip.hold_until_collision.store(false, Ordering::SeqCst);
    let c = Arc::clone(&chip);
    upgrade(
        |nor| nor,
        // Armed once pack 1 is in: the upgrade's first operation waits for the inference task.
        move |f: &SharedNor| {
            c.hold_until_collision.store(true, Ordering::SeqCst);
            f.nor.ops()
        },
        &chip,
    );
    assert!(chip.collisions.load(Ordering::SeqCst) > 0);
}
