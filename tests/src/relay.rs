//! A TCP relay a test can cut: a peer (an LM's broker connection, say) goes away
//! and comes back without stopping the machine's service behind it. Or hold: the
//! bytes a peer sends wait in the relay, connections open, until released (a
//! network cut the kernel's retransmissions outlive); a relay that held passes a
//! peer's close on 500 ms after its last bytes (the close came later than the
//! data, as a retransmitted segment may).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Relays TCP connections from a loopback port to `target` while up; cut, it closes
/// every relayed connection and closes new ones at once.
#[derive(Debug)]
pub struct Relay {
    pub port: u16,
    up: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
    /// Set by [`Relay::hold`]: closes are passed on late.
    lingers: Arc<AtomicBool>,
    open: Arc<Mutex<Vec<TcpStream>>>,
}

impl Relay {
    pub fn start(target: &'static str) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").expect("relay port");
        let port = listener.local_addr().expect("relay address").port();
        let up = Arc::new(AtomicBool::new(true));
        let held = Arc::new(AtomicBool::new(false));
        let lingers = Arc::new(AtomicBool::new(false));
        let open: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (up2, open2) = (up.clone(), open.clone());
        let flags = (held.clone(), lingers.clone());
        std::thread::spawn(move || {
            for client in listener.incoming().map_while(Result::ok) {
                if !up2.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                let mut open = open2.lock().expect("relay list");
                for s in [&client, &server] {
                    open.extend(s.try_clone().ok());
                }
                pipe(&client, &server, &flags);
                pipe(&server, &client, &flags);
            }
        });
        Relay {
            port,
            up,
            held,
            lingers,
            open,
        }
    }

    /// From now on, what either side sends waits in the relay (read, not passed
    /// on), on the connections open and on new ones, until [`Relay::release`].
    pub fn hold(&self) {
        self.held.store(true, Ordering::SeqCst);
        self.lingers.store(true, Ordering::SeqCst);
    }

    /// Passes on what was held, and everything after it.
    pub fn release(&self) {
        self.held.store(false, Ordering::SeqCst);
    }

    /// Closes every relayed connection and refuses new ones.
    pub fn cut(&self) {
        self.up.store(false, Ordering::SeqCst);
        for s in self.open.lock().expect("relay list").drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }

    /// Relays new connections again.
    pub fn restore(&self) {
        self.up.store(true, Ordering::SeqCst);
    }
}

/// Copies `from` to `to` on a thread of its own until either side closes; what
/// it reads while held waits until it is not; a close is passed on late once the
/// relay lingers.
fn pipe(from: &TcpStream, to: &TcpStream, (held, lingers): &(Arc<AtomicBool>, Arc<AtomicBool>)) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let (held, lingers) = (held.clone(), lingers.clone());
    std::thread::spawn(move || {
        let mut buf = [0u8; 16 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf) {
            while held.load(Ordering::SeqCst) {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        if lingers.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(500));
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
