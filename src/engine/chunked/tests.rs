//! Tests of `chunked`.
use super::*;
use crate::test_rng::Rng;

const SIZES: [usize; 6] = [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 7];

fn log(n: usize) -> Chunked<usize> {
    (0..n).collect()
}

/// Checks every read path of `log` against `model`.
fn check<T: Clone + PartialEq + fmt::Debug>(log: &Chunked<T>, model: &[T]) {
    assert_eq!(log.len(), model.len());
    assert_eq!(log.is_empty(), model.is_empty());
    assert_eq!(log.first(), model.first());
    assert_eq!(log.last(), model.last());
    assert_eq!(log.get(model.len()), None);
    assert_eq!(log.to_vec(), model);
    assert!(log.iter().eq(model.iter()));
    assert!(log.iter().rev().eq(model.iter().rev()));
    assert_eq!(log.iter().len(), model.len());
    let mut seen = Vec::with_capacity(model.len());
    let slices: Vec<&[T]> = log.chunks().collect();
    for (i, s) in slices.iter().enumerate() {
        assert!(!s.is_empty());
        if i + 1 < slices.len() {
            assert_eq!(s.len(), CHUNK, "only the tail may be partial");
        }
        seen.extend_from_slice(s);
    }
    assert_eq!(seen, model);
    assert_eq!(log.chunks().len(), model.len().div_ceil(CHUNK));
    // Spot-check indexing at and around the chunk boundaries.
    for i in [
        0,
        1,
        CHUNK - 1,
        CHUNK,
        CHUNK + 1,
        model.len().wrapping_sub(1),
    ] {
        if i < model.len() {
            assert_eq!(log.get(i), Some(&model[i]));
            assert_eq!(&log[i], &model[i]);
        }
    }
}

#[test]
fn push_get_iter_across_boundaries() {
    for n in SIZES {
        let l = log(n);
        let model: Vec<usize> = (0..n).collect();
        check(&l, &model);
        for i in 0..n {
            assert_eq!(l[i], i);
        }
        assert_eq!(format!("{:?}", log(3)), "[0, 1, 2]");
    }
}

#[test]
fn iterator_ends_meet() {
    for n in SIZES {
        let l = log(n);
        let mut it = l.iter();
        let (mut lo, mut hi) = (0, n);
        let mut step = 0usize;
        while lo < hi {
            assert_eq!(it.len(), hi - lo);
            // Alternate ends, uneven so the meeting point varies.
            if step % 3 == 0 {
                hi -= 1;
                assert_eq!(it.next_back(), Some(&hi));
            } else {
                assert_eq!(it.next(), Some(&lo));
                lo += 1;
            }
            step += 1;
        }
        assert_eq!(it.len(), 0);
        assert_eq!(it.next(), None);
        assert_eq!(it.next_back(), None);
    }
}

#[test]
fn ranges_nth_and_folds() {
    let n = 3 * CHUNK + 7;
    let l = log(n);
    let model: Vec<usize> = (0..n).collect();
    let points = [
        0,
        1,
        CHUNK - 1,
        CHUNK,
        CHUNK + 1,
        2 * CHUNK,
        2 * CHUNK + 5,
        3 * CHUNK,
        3 * CHUNK + 6,
        n,
    ];
    for &a in &points {
        assert!(l.iter_from(a).eq(model[a..].iter()));
        for &b in points.iter().filter(|&&b| b >= a) {
            let want = &model[a..b];
            assert!(l.range(a..b).eq(want.iter()));
            assert!(l.range(a..b).rev().eq(want.iter().rev()));
            assert_eq!(l.range(a..b).len(), b - a);
            assert_eq!(l.range(a..b).count(), b - a);
            assert_eq!(l.range(a..b).last(), want.last());
            assert_eq!(l.range(a..b).sum::<usize>(), want.iter().sum::<usize>());
            assert_eq!(
                l.range(a..b).rfold(Vec::new(), |mut v, &x| {
                    v.push(x);
                    v
                }),
                want.iter().rev().copied().collect::<Vec<_>>()
            );
            let flat: Vec<usize> = l.slice_iter(a..b).flatten().copied().collect();
            assert_eq!(flat, want);
            let back: Vec<&[usize]> = l.slice_iter(a..b).rev().collect();
            let fwd: Vec<&[usize]> = l.slice_iter(a..b).collect();
            assert_eq!(back.into_iter().rev().collect::<Vec<_>>(), fwd);
            assert!(l.slice_iter(a..b).len() <= (b - a) / CHUNK + 2);
            for &k in &points {
                assert_eq!(l.range(a..b).nth(k), want.get(k));
                assert_eq!(l.range(a..b).nth_back(k), want.iter().nth_back(k));
                let mut it = l.range(a..b);
                let got = it.nth(k / 2);
                assert_eq!(got, want.get(k / 2));
                assert_eq!(it.len(), want.len().saturating_sub(k / 2 + 1));
                assert!(it.eq(want.iter().skip(k / 2 + 1)));
            }
        }
    }
    assert!(l.range(..=CHUNK).eq(model[..=CHUNK].iter()));
    assert!(l.range(..).eq(model.iter()));
}

#[test]
#[should_panic(expected = "out of range")]
fn range_past_end_panics() {
    let _ = log(CHUNK + 1).range(0..CHUNK + 2);
}

#[test]
#[should_panic(expected = "out of range")]
fn index_past_end_panics() {
    let _ = log(CHUNK)[CHUNK];
}

#[test]
#[should_panic(expected = "out of range")]
fn prefix_past_end_panics() {
    let _ = log(CHUNK).prefix(CHUNK + 1);
}

#[test]
fn truncate_and_prefix_across_boundaries() {
    for n in SIZES {
        let model: Vec<usize> = (0..n).collect();
        for m in SIZES.into_iter().chain([n + 5]) {
            let parent = log(n);
            let p = if m <= n { Some(parent.prefix(m)) } else { None };
            let mut t = parent.clone();
            t.truncate(m);
            let keep = m.min(n);
            check(&t, &model[..keep]);
            if let Some(p) = p {
                check(&p, &model[..m]);
            }
            check(&parent, &model);
            // The truncated log keeps working as an append target.
            t.extend(keep..keep + CHUNK + 2);
            let grown: Vec<usize> = (0..keep + CHUNK + 2).collect();
            check(&t, &grown);
            check(&parent, &model);
        }
    }
}

#[test]
fn zero_sized_elements() {
    let mut l: Chunked<()> = std::iter::repeat_n((), CHUNK + 1).collect();
    assert_eq!(l.len(), CHUNK + 1);
    l.truncate(3);
    assert_eq!(l.iter().count(), 3);
    l.clear();
    assert!(l.is_empty());
}

#[test]
fn model_based_random_ops() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // A pool of logs, some sharing chunks, each with its Vec model.
    let mut pool: Vec<(Chunked<u64>, Vec<u64>)> = vec![(Chunked::new(), Vec::new())];
    let mut next_value = 0u64;
    for _ in 0..1500 {
        let i = rng.below(pool.len());
        match rng.below(8) {
            0..=2 => {
                // Pushes: sometimes a few, sometimes more than a chunk.
                let k = match rng.below(4) {
                    0 => rng.below(2 * CHUNK + 3),
                    _ => rng.below(40),
                };
                for _ in 0..k {
                    next_value += 1;
                    pool[i].0.push(next_value);
                    pool[i].1.push(next_value);
                }
            }
            3 => {
                let len = pool[i].1.len();
                let to = match rng.below(3) {
                    0 => len.saturating_sub(rng.below(8)),
                    1 => (len / CHUNK) * CHUNK + rng.below(3),
                    _ => rng.below(len + 3),
                };
                pool[i].0.truncate(to);
                pool[i].1.truncate(to);
            }
            4 => {
                let k = rng.below(CHUNK / 2);
                let extra: Vec<u64> = (0..k as u64).map(|x| x + next_value).collect();
                next_value += k as u64;
                pool[i].0.extend_from_slice(&extra);
                pool[i].1.extend_from_slice(&extra);
            }
            5 | 6 => {
                let len = pool[i].1.len();
                let m = rng.below(len + 1);
                let child = (pool[i].0.prefix(m), pool[i].1[..m].to_vec());
                if pool.len() < 6 {
                    pool.push(child);
                } else {
                    let j = rng.below(pool.len());
                    pool[j] = child;
                }
            }
            _ => {
                let child = pool[i].clone();
                if pool.len() < 6 {
                    pool.push(child);
                } else {
                    let j = rng.below(pool.len());
                    pool[j] = child;
                }
            }
        }
        for (log, model) in &pool {
            assert_eq!(log.len(), model.len());
            assert!(log.iter().eq(model.iter()));
            if model.len() > 2 {
                let a = rng.below(model.len());
                let b = a + rng.below(model.len() - a + 1);
                assert!(log.range(a..b).rev().eq(model[a..b].iter().rev()));
            }
        }
    }
    for (log, model) in &pool {
        check(log, model);
    }
}

fn arcs(n: usize) -> Chunked<Arc<u64>> {
    (0..n as u64).map(Arc::new).collect()
}

fn values(log: &Chunked<Arc<u64>>) -> Vec<u64> {
    log.iter().map(|x| **x).collect()
}

#[test]
fn prefix_and_clone_share_full_chunks() {
    let n = 2 * CHUNK + 10;
    let parent = arcs(n);
    let before = values(&parent);
    let in_chunk0 = 5;
    let in_chunk1 = CHUNK + 2;
    let in_tail = 2 * CHUNK + 1;
    let count = |i: usize| Arc::strong_count(&parent[i]);
    assert_eq!(
        (count(in_chunk0), count(in_chunk1), count(in_tail)),
        (1, 1, 1)
    );

    // A prefix past both full chunks: both shared, the tail copied.
    let p = parent.prefix(2 * CHUNK + 3);
    assert_eq!(
        (count(in_chunk0), count(in_chunk1), count(in_tail)),
        (1, 1, 2)
    );
    let ps: Vec<*const Arc<u64>> = p.chunks().map(<[_]>::as_ptr).collect();
    let qs: Vec<*const Arc<u64>> = parent.chunks().map(<[_]>::as_ptr).collect();
    assert_eq!(ps[0], qs[0]);
    assert_eq!(ps[1], qs[1]);
    assert_ne!(ps[2], qs[2]);

    // A prefix ending inside chunk 1: chunk 0 shared, part of 1 copied.
    let q = parent.prefix(CHUNK + 5);
    assert_eq!(
        (count(in_chunk0), count(in_chunk1), count(in_tail)),
        (1, 2, 2)
    );

    // A clone shares both full chunks and copies only the tail.
    let mut c = parent.clone();
    assert_eq!(
        (count(in_chunk0), count(in_chunk1), count(in_tail)),
        (1, 2, 3)
    );

    // Modifying children never changes the parent.
    c.truncate(CHUNK + 3);
    c.push(Arc::new(1_000_000));
    c.extend((0..CHUNK as u64).map(|x| Arc::new(x + 2_000_000)));
    assert_eq!(values(&parent), before);
    let mut p = p;
    p.truncate(7);
    p.push(Arc::new(3_000_000));
    assert_eq!(values(&parent), before);
    assert_eq!(values(&p)[..7], before[..7]);
    assert_eq!(*p[7], 3_000_000);
    let mut q = q;
    q.push(Arc::new(4_000_000));
    assert_eq!(values(&q)[..CHUNK + 5], before[..CHUNK + 5]);
    assert_eq!(values(&parent), before);

    // Modifying the parent never changes a child.
    let c_before = values(&c);
    let mut parent = parent;
    parent.truncate(1);
    parent.push(Arc::new(5_000_000));
    assert_eq!(values(&c), c_before);
    assert_eq!(values(&q)[..CHUNK + 5], before[..CHUNK + 5]);

    // Dropping the children releases their clones.
    drop((c, p, q));
    assert_eq!(Arc::strong_count(&parent[0]), 1);
}

#[test]
fn fork_of_large_log_clones_at_most_one_chunk() {
    let n = 1_000_003;
    let parent = arcs(n);
    let fork = parent.clone();
    let shared = parent.chunks().len() - 1;
    assert_eq!(shared, n / CHUNK);
    let copied = parent.iter().filter(|x| Arc::strong_count(x) > 1).count();
    assert_eq!(copied, n % CHUNK);
    let half = fork.prefix(n / 2);
    assert_eq!(half.len(), n / 2);
    assert!(half.iter().eq(parent.iter().take(n / 2)));
    drop(fork);
    let copied = parent.iter().filter(|x| Arc::strong_count(x) > 1).count();
    assert_eq!(copied, (n / 2) % CHUNK);
}
