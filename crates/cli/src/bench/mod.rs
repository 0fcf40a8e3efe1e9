//! `docmem bench ...`: benchmarks. Each prints JSON (with `--json`) or a table, and times
//! a reference in the same run so figures are ratios, not absolutes from another day.

use clap::Subcommand;

use crate::CliError;

mod index;
mod stats;

#[derive(Subcommand)]
pub enum BenchCommand {
    /// Vector search: exact flat scan vs int8 scan vs HNSW on random unit vectors.
    Index(index::IndexBenchArgs),
}

pub fn run(cmd: &BenchCommand) -> Result<(), CliError> {
    match cmd {
        BenchCommand::Index(a) => index::run(a),
    }
}
