//! Measurements and process helpers: medians and percentiles, thread and
//! process CPU clocks, timers, RSS from /proc, the scratch directory and
//! the machine and source-tree description.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{json, Value};

pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[((v.len() - 1) as f64 * p).round() as usize]
}

fn clock(id: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid clock id and a writable timespec.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// CPU seconds consumed by the calling thread.
fn thread_cpu() -> f64 {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// CPU seconds consumed by every thread of this process.
pub fn process_cpu() -> f64 {
    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Elapsed (wall) and calling-thread CPU seconds of one region.
#[derive(Clone, Copy, Default, Debug)]
pub struct Secs {
    pub wall: f64,
    pub cpu: f64,
}

impl std::ops::AddAssign for Secs {
    fn add_assign(&mut self, o: Secs) {
        self.wall += o.wall;
        self.cpu += o.cpu;
    }
}

impl Secs {
    pub fn json(self) -> Value {
        json!({"wall": self.wall, "cpu": self.cpu})
    }
}

pub struct Timer {
    wall: Instant,
    cpu: f64,
}

impl Timer {
    pub fn start() -> Timer {
        Timer {
            cpu: thread_cpu(),
            wall: Instant::now(),
        }
    }
    pub fn stop(&self) -> Secs {
        let wall = self.wall.elapsed().as_secs_f64();
        Secs {
            wall,
            cpu: thread_cpu() - self.cpu,
        }
    }
}

/// Medians (each clock on its own) of a list of timings.
pub fn median_secs(v: &[Secs]) -> Secs {
    Secs {
        wall: median(&mut v.iter().map(|x| x.wall).collect::<Vec<_>>()),
        cpu: median(&mut v.iter().map(|x| x.cpu).collect::<Vec<_>>()),
    }
}

/// `VmRSS` / `VmHWM` of this process in bytes.
pub fn proc_status(key: &str) -> u64 {
    let text = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    text.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(0, |kb| kb * 1024)
}

pub struct TempDir(pub PathBuf);

impl Drop for TempDir {
    /// Removed at the end, unless `DSH_BENCH_KEEP` is set (to profile the
    /// stores afterwards, e.g. `--child-open` under perf).
    fn drop(&mut self) {
        if std::env::var_os("DSH_BENCH_KEEP").is_some() {
            eprintln!("kept {}", self.0.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = std::fs::read_dir(p) else {
        return std::fs::metadata(p).map_or(0, |m| m.len());
    };
    rd.flatten()
        .map(|e| {
            let p = e.path();
            if p.is_dir() {
                dir_size(&p)
            } else {
                e.metadata().map_or(0, |m| m.len())
            }
        })
        .sum()
}

/// The source tree measured: HEAD and the files changed under src/ (read-only git).
pub fn tree() -> Value {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("--no-optional-locks")
            .arg("-C")
            .arg(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    json!({
        "head": git(&["log", "-1", "--format=%h %s"]),
        "changedUnderSrc": git(&["status", "--porcelain", "--", ":(top)src", ":(top)include"])
            .map(|s| s.lines().map(|l| l.trim().to_string()).collect::<Vec<_>>()),
    })
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn machine() -> Value {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown".into(), |s| s.trim().to_string());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .unwrap_or_default()
        .lines()
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    json!({
        "nproc": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "cpu": cpu,
        "memTotalBytes": mem * 1024,
        "os": std::env::consts::OS,
    })
}
