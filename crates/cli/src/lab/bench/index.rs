//! `docmem bench index`: build time, query latency and recall@k of the int8 scan and of
//! HNSW against exact flat search, on the same random unit vectors in one run.
//!
//! Random Gaussian directions are the hard case for graph indexes (no cluster structure to
//! exploit), so recall here is a floor for real embeddings. Real embeddings come in with
//! `--vectors` and `--query-vectors` (the lines `docmem embed` prints), which is how the
//! int8 rows a library's sealed parts keep are checked against f32.

use std::io::Write;
use std::time::Instant;

use clap::Args;
use docmem_core::index::{FlatIndex, Hit, HnswParams, HnswSegment, Int8Index, Metric, VectorIndex};
use rand::{Rng, SeedableRng};
use serde::Serialize;

use super::stats::Latency;
use crate::CliError;

#[derive(Args, Clone)]
pub struct IndexBenchArgs {
    /// Number of vectors.
    #[arg(long, default_value_t = 100_000)]
    pub n: usize,
    /// Dimension.
    #[arg(long, default_value_t = 384)]
    pub dim: usize,
    /// Number of queries.
    #[arg(long, default_value_t = 500)]
    pub queries: usize,
    /// Neighbours per query (recall@k).
    #[arg(long, default_value_t = 10)]
    pub k: usize,
    /// HNSW links per node (layer 0 has twice as many).
    #[arg(long, default_value_t = HnswParams::default().m)]
    pub m: usize,
    /// HNSW ef_construction.
    #[arg(long, default_value_t = HnswParams::default().ef_construction)]
    pub ef_construction: usize,
    /// HNSW ef_search for the main row; more values are swept in `hnsw_sweep`.
    #[arg(long, default_value_t = HnswParams::default().ef_search)]
    pub ef_search: usize,
    /// ef_search values to sweep (recall/latency trade-off).
    #[arg(long, value_delimiter = ',', default_values_t = vec![32, 64, 128, 256, 512])]
    pub sweep: Vec<usize>,
    /// The vectors: `random` (Gaussian directions, no structure: the hard case) or
    /// `clustered` (a mixture of 1,000 Gaussian clusters, closer to real embeddings).
    #[arg(long, default_value = "random")]
    pub data: DataKind,
    /// Vectors to index instead of generated ones: one per line, values separated by
    /// spaces (`docmem embed` output); sets --n and --dim
    #[arg(long, requires = "query_vectors")]
    pub vectors: Option<std::path::PathBuf>,
    /// Query vectors, with --vectors (`docmem embed --query` output); sets --queries
    #[arg(long, requires = "vectors")]
    pub query_vectors: Option<std::path::PathBuf>,
    /// RNG seed.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum DataKind {
    Random,
    Clustered,
    /// Read from --vectors and --query-vectors.
    #[value(skip)]
    Files,
}

#[derive(Serialize)]
struct SweepRow {
    ef_search: usize,
    #[serde(flatten)]
    latency: Latency,
    recall_at_k: f64,
}

#[derive(Serialize)]
struct Row {
    index: &'static str,
    build_s: f64,
    #[serde(flatten)]
    latency: Latency,
    recall_at_k: f64,
    /// Flat p50 latency over this index's p50 latency.
    speedup_vs_flat: f64,
}

#[derive(Serialize)]
struct Report {
    bench: &'static str,
    n: usize,
    dim: usize,
    queries: usize,
    k: usize,
    threads: usize,
    data: DataKind,
    hnsw: HnswParamsOut,
    results: Vec<Row>,
    hnsw_sweep: Vec<SweepRow>,
}

#[derive(Serialize)]
struct HnswParamsOut {
    m: usize,
    ef_construction: usize,
    ef_search: usize,
}

fn gaussian_unit(rng: &mut impl Rng, dim: usize) -> Vec<f32> {
    let mut v: Vec<f32> = (0..dim)
        .map(|_| {
            // Box–Muller.
            let u1: f32 = rng.gen_range(f32::EPSILON..1.0);
            let u2: f32 = rng.gen();
            (-2.0 * u1.ln()).sqrt() * (std::f32::consts::TAU * u2).cos()
        })
        .collect();
    docmem_core::vector::normalize(&mut v);
    v
}

/// A mixture of Gaussian clusters on the sphere: pick a centre, add noise, normalize.
fn clustered(rng: &mut impl Rng, centres: &[Vec<f32>], spread: f32) -> Vec<f32> {
    let c = &centres[rng.gen_range(0..centres.len())];
    let noise = gaussian_unit(rng, c.len());
    let mut v: Vec<f32> = c.iter().zip(&noise).map(|(a, b)| a + spread * b).collect();
    docmem_core::vector::normalize(&mut v);
    v
}

fn time_queries(
    queries: &[Vec<f32>],
    mut search: impl FnMut(&[f32]) -> Result<Vec<Hit>, docmem_core::Error>,
) -> Result<(Latency, Vec<Vec<Hit>>), CliError> {
    let mut times = Vec::with_capacity(queries.len());
    let mut results = Vec::with_capacity(queries.len());
    for q in queries {
        let t = Instant::now();
        let hits = search(q).map_err(|e| CliError::BadArgument { message: e.to_string() })?;
        times.push(t.elapsed().as_secs_f64());
        results.push(hits);
    }
    Ok((Latency::of(&mut times), results))
}

fn recall(truth: &[Vec<Hit>], got: &[Vec<Hit>]) -> f64 {
    let mut found = 0usize;
    let mut total = 0usize;
    for (t, g) in truth.iter().zip(got) {
        total += t.len();
        found += g.iter().filter(|h| t.iter().any(|x| x.id == h.id)).count();
    }
    if total == 0 {
        1.0
    } else {
        found as f64 / total as f64
    }
}

/// Vectors from a file of lines of space-separated numbers, all of one dimension.
fn read_vectors(path: &std::path::Path) -> Result<Vec<Vec<f32>>, CliError> {
    let bad = |message: String| CliError::BadArgument { message: format!("{}: {message}", path.display()) };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let mut out: Vec<Vec<f32>> = Vec::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Vec<f32> =
            line.split_whitespace().map(str::parse).collect::<Result<_, _>>().map_err(|e| bad(format!("line {}: {e}", i + 1)))?;
        if out.first().is_some_and(|f| f.len() != v.len()) || v.is_empty() {
            return Err(bad(format!("line {} has {} values, not {}", i + 1, v.len(), out.first().map_or(0, Vec::len))));
        }
        out.push(v);
    }
    if out.is_empty() {
        return Err(bad("no vectors".into()));
    }
    Ok(out)
}

pub fn run(a: &IndexBenchArgs) -> Result<(), CliError> {
    let mut a = a.clone();
    let files = match (&a.vectors, &a.query_vectors) {
        (Some(v), Some(q)) => Some((read_vectors(v)?, read_vectors(q)?)),
        _ => None,
    };
    if let Some((data, queries)) = &files {
        if data[0].len() != queries[0].len() {
            return Err(CliError::BadArgument { message: "--vectors and --query-vectors differ in dimension".into() });
        }
        (a.n, a.dim, a.queries, a.data) = (data.len(), data[0].len(), queries.len(), DataKind::Files);
    }
    let a = &a;
    if a.n == 0 || a.dim == 0 || a.queries == 0 || a.k == 0 {
        return Err(CliError::BadArgument { message: "--n, --dim, --queries and --k must be at least 1".into() });
    }
    let mut rng = rand::rngs::SmallRng::seed_from_u64(a.seed);
    let log = |msg: &str| {
        if !a.json {
            eprintln!("{msg}");
        }
    };
    log(&format!("generating {} vectors of dimension {}…", a.n, a.dim));
    let (data, queries): (Vec<Vec<f32>>, Vec<Vec<f32>>) = match a.data {
        DataKind::Files => files.unwrap_or_default(),
        DataKind::Random => {
            ((0..a.n).map(|_| gaussian_unit(&mut rng, a.dim)).collect(), (0..a.queries).map(|_| gaussian_unit(&mut rng, a.dim)).collect())
        }
        DataKind::Clustered => {
            let centres: Vec<Vec<f32>> = (0..1000).map(|_| gaussian_unit(&mut rng, a.dim)).collect();
            (
                (0..a.n).map(|_| clustered(&mut rng, &centres, 0.6)).collect(),
                (0..a.queries).map(|_| clustered(&mut rng, &centres, 0.6)).collect(),
            )
        }
    };

    let t = Instant::now();
    let mut flat = FlatIndex::new(a.dim, Metric::Cosine);
    for (i, v) in data.iter().enumerate() {
        flat.add(i as u32, v).map_err(|e| CliError::BadArgument { message: e.to_string() })?;
    }
    let flat_build = t.elapsed().as_secs_f64();
    log("exact flat search…");
    let (flat_lat, truth) = time_queries(&queries, |q| flat.search(q, a.k))?;

    let t = Instant::now();
    let int8 = Int8Index::from_flat(flat.clone());
    let int8_build = t.elapsed().as_secs_f64();
    log("int8 scan…");
    let (int8_lat, int8_res) = time_queries(&queries, |q| int8.search(q, a.k))?;

    log("building HNSW…");
    let params = HnswParams { m: a.m, ef_construction: a.ef_construction, ef_search: a.ef_search, ..HnswParams::default() };
    let t = Instant::now();
    let hnsw = HnswSegment::build(a.dim, Metric::Cosine, flat.ids().to_vec(), flat.rows(), params);
    let hnsw_build = t.elapsed().as_secs_f64();
    log("HNSW search…");
    let (hnsw_lat, hnsw_res) = time_queries(&queries, |q| hnsw.search(q, a.k))?;
    // What a library's parts keep: the graph's rows as int8 codes, and unlinked parts
    // scanned exactly over the same codes.
    let t = Instant::now();
    let hnsw_int8 = HnswSegment::build(a.dim, Metric::Cosine, flat.ids().to_vec(), flat.rows(), params).into_int8();
    let hnsw_int8_build = t.elapsed().as_secs_f64();
    let (hnsw_int8_lat, hnsw_int8_res) = time_queries(&queries, |q| hnsw_int8.search(q, a.k))?;
    let scan_int8 = HnswSegment::unlinked_rows(a.dim, Metric::Cosine, flat.ids().to_vec(), flat.rows(), params).into_int8();
    let (scan_int8_lat, scan_int8_res) = time_queries(&queries, |q| scan_int8.search(q, a.k))?;
    let mut sweep = Vec::new();
    for &ef in &a.sweep {
        let (latency, res) = time_queries(&queries, |q| hnsw.search_ef(q, a.k, ef))?;
        sweep.push(SweepRow { ef_search: ef, latency, recall_at_k: recall(&truth, &res) });
    }

    let speedup = |l: &Latency| if l.p50_ms > 0.0 { flat_lat.p50_ms / l.p50_ms } else { 0.0 };
    let report = Report {
        bench: "index",
        n: a.n,
        dim: a.dim,
        queries: a.queries,
        k: a.k,
        threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        data: a.data,
        hnsw: HnswParamsOut { m: a.m, ef_construction: a.ef_construction, ef_search: a.ef_search },
        results: vec![
            Row { index: "flat (exact)", build_s: flat_build, latency: flat_lat, recall_at_k: 1.0, speedup_vs_flat: 1.0 },
            Row {
                index: "int8 scan + f32 rescore",
                build_s: int8_build,
                latency: int8_lat,
                recall_at_k: recall(&truth, &int8_res),
                speedup_vs_flat: speedup(&int8_lat),
            },
            Row {
                index: "hnsw",
                build_s: hnsw_build,
                latency: hnsw_lat,
                recall_at_k: recall(&truth, &hnsw_res),
                speedup_vs_flat: speedup(&hnsw_lat),
            },
            Row {
                index: "hnsw, int8 rows",
                build_s: hnsw_int8_build,
                latency: hnsw_int8_lat,
                recall_at_k: recall(&truth, &hnsw_int8_res),
                speedup_vs_flat: speedup(&hnsw_int8_lat),
            },
            Row {
                index: "int8 rows, exact scan",
                build_s: 0.0,
                latency: scan_int8_lat,
                recall_at_k: recall(&truth, &scan_int8_res),
                speedup_vs_flat: speedup(&scan_int8_lat),
            },
        ],
        hnsw_sweep: sweep,
    };
    let mut out = std::io::stdout().lock();
    if a.json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(std::io::Error::from)?;
        writeln!(out)?;
    } else {
        writeln!(
            out,
            "bench index: data={:?} n={} dim={} queries={} k={} threads={} hnsw m={} ef_construction={} ef_search={}",
            a.data, a.n, a.dim, a.queries, a.k, report.threads, a.m, a.ef_construction, a.ef_search
        )?;
        writeln!(out, "{:<26} {:>10} {:>10} {:>10} {:>11} {:>9}", "index", "build s", "p50 ms", "p99 ms", "recall@k", "×flat")?;
        for r in &report.results {
            writeln!(
                out,
                "{:<26} {:>10.2} {:>10.3} {:>10.3} {:>11.4} {:>9.1}",
                r.index, r.build_s, r.latency.p50_ms, r.latency.p99_ms, r.recall_at_k, r.speedup_vs_flat
            )?;
        }
        writeln!(out, "\nhnsw ef_search sweep")?;
        writeln!(out, "{:<26} {:>10} {:>10} {:>11} {:>9}", "ef_search", "p50 ms", "p99 ms", "recall@k", "×flat")?;
        for r in &report.hnsw_sweep {
            writeln!(
                out,
                "{:<26} {:>10.3} {:>10.3} {:>11.4} {:>9.1}",
                r.ef_search,
                r.latency.p50_ms,
                r.latency.p99_ms,
                r.recall_at_k,
                speedup(&r.latency)
            )?;
        }
    }
    Ok(())
}
