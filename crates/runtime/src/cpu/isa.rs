//! Which x86 kernel path runs: the best the CPU has, capped by `DOCMEM_CPU`.
//!
//! The CPU backend has four paths on x86_64, each a superset of the one before: the
//! portable kernels, AVX2 (with FMA and F16C), AVX-512 (F and BW, VL; BF16 for the encoder
//! where present) and AVX-512 VNNI. A user's CPU picks one; to check parity with llama.cpp
//! on every path a user may take, a test machine must be able to take the lower ones too.
//! `DOCMEM_CPU` caps the path for the process:
//!
//! | `DOCMEM_CPU` | kernels |
//! | --- | --- |
//! | `portable` | the scalar reference kernels |
//! | `avx2` | AVX2 + FMA + F16C, as on a CPU without AVX-512 |
//! | `avx512` | AVX-512 without VNNI |
//! | `vnni` (or unset) | everything the CPU has |
//!
//! The cap is read once, before the first kernel runs. An unknown value is reported on
//! stderr and ignored: it must not stop a user's program, and the parity tests check that
//! the path in use is the one they asked for. `docmem bench lm` prints the path in use.

use std::sync::OnceLock;

/// A kernel path, lowest first (the order is the cap's).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Isa {
    /// The portable (scalar) kernels.
    Portable,
    /// AVX2, FMA and F16C.
    Avx2,
    /// AVX-512 F, BW and VL (and BF16 where present), without VNNI.
    Avx512,
    /// AVX-512 VNNI on top.
    Vnni,
}

impl Isa {
    /// Every path, lowest first.
    pub const ALL: [Isa; 4] = [Isa::Portable, Isa::Avx2, Isa::Avx512, Isa::Vnni];

    /// The name `DOCMEM_CPU` takes.
    pub fn name(self) -> &'static str {
        match self {
            Isa::Portable => "portable",
            Isa::Avx2 => "avx2",
            Isa::Avx512 => "avx512",
            Isa::Vnni => "vnni",
        }
    }

    /// The path named `name` (case-insensitive), or `None`.
    pub fn parse(name: &str) -> Option<Isa> {
        Isa::ALL.into_iter().find(|i| i.name().eq_ignore_ascii_case(name.trim()))
    }
}

/// The environment variable that caps the path.
pub const CAP_VAR: &str = "DOCMEM_CPU";

/// The cap `DOCMEM_CPU` sets ([`Isa::Vnni`], no cap, when unset or unknown).
pub fn cap() -> Isa {
    static CAP: OnceLock<Isa> = OnceLock::new();
    *CAP.get_or_init(|| match std::env::var(CAP_VAR) {
        Err(_) => Isa::Vnni,
        Ok(v) if v.trim().is_empty() => Isa::Vnni,
        Ok(v) => Isa::parse(&v).unwrap_or_else(|| {
            eprintln!("docmem: {CAP_VAR}={v:?} is not one of portable, avx2, avx512, vnni; ignored");
            Isa::Vnni
        }),
    })
}

/// The best path this CPU has, whatever the cap.
pub fn detected() -> Isa {
    #[cfg(target_arch = "x86_64")]
    {
        static HAS: OnceLock<Isa> = OnceLock::new();
        *HAS.get_or_init(|| {
            let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c");
            let avx512 =
                avx2 && is_x86_feature_detected!("avx512f") && is_x86_feature_detected!("avx512bw") && is_x86_feature_detected!("avx512vl");
            let vnni = avx512 && is_x86_feature_detected!("avx512vnni");
            match (avx2, avx512, vnni) {
                (_, _, true) => Isa::Vnni,
                (_, true, _) => Isa::Avx512,
                (true, _, _) => Isa::Avx2,
                _ => Isa::Portable,
            }
        })
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        Isa::Portable
    }
}

/// The path the kernels take: the best detected, capped.
pub fn in_use() -> Isa {
    detected().min(cap())
}

/// Whether the kernels of `isa` may run (the CPU has them and the cap allows them).
pub fn allows(isa: Isa) -> bool {
    in_use() >= isa
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order_is_the_caps() {
        for isa in Isa::ALL {
            assert_eq!(Isa::parse(isa.name()), Some(isa));
        }
        assert_eq!(Isa::parse(" AVX2 "), Some(Isa::Avx2));
        assert_eq!(Isa::parse("sse4"), None);
        assert!(Isa::Portable < Isa::Avx2 && Isa::Avx2 < Isa::Avx512 && Isa::Avx512 < Isa::Vnni);
        assert!(in_use() <= detected() && in_use() <= cap());
    }
}
