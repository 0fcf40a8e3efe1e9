//! Property: any index, after any sequence of adds, deletes and seals, serializes to bytes
//! that decode to an index giving the same answers; any truncation of those bytes, and any
//! flipped byte, is an error, never a panic.

use docmem_core::index::{Bm25Index, Bm25Params, HnswParams, Metric, SegmentParams, SegmentedIndex, VectorIndex};
use proptest::prelude::*;

const DIM: usize = 6;

#[derive(Clone, Debug)]
enum Op {
    Add(u32, Vec<f32>),
    Remove(u32),
    Seal,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0u32..64, prop::collection::vec(-1.0f32..1.0, DIM)).prop_map(|(id, v)| Op::Add(id, v)),
        2 => (0u32..64).prop_map(Op::Remove),
        1 => Just(Op::Seal),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn segmented_index_round_trips(ops in prop::collection::vec(op(), 1..120), queries in prop::collection::vec(prop::collection::vec(-1.0f32..1.0, DIM), 4), cut in any::<prop::sample::Index>(), flip in any::<prop::sample::Index>()) {
        let params = SegmentParams { seal_threshold: 9, max_sealed: 3, hnsw: HnswParams { m: 4, ..HnswParams::default() } };
        let mut idx = SegmentedIndex::new(DIM, Metric::Cosine, params.clone());
        for op in ops {
            match op {
                Op::Add(id, v) => { let _ = idx.add(id, &v); }
                Op::Remove(id) => { idx.remove(id); }
                Op::Seal => idx.seal(),
            }
        }
        let bytes = idx.to_bytes();
        let back = SegmentedIndex::from_bytes(&bytes, params.clone()).unwrap();
        prop_assert_eq!(back.len(), idx.len());
        for q in &queries {
            prop_assert_eq!(back.search(q, 5).unwrap(), idx.search(q, 5).unwrap());
        }
        prop_assert_eq!(back.to_bytes(), bytes.clone(), "re-encoding is stable");
        let c = cut.index(bytes.len());
        prop_assert!(SegmentedIndex::from_bytes(&bytes[..c], params.clone()).is_err());
        let mut bad = bytes.clone();
        let f = flip.index(bad.len());
        bad[f] ^= 0x5a;
        prop_assert!(SegmentedIndex::from_bytes(&bad, params).is_err());
    }

    #[test]
    fn bm25_round_trips(docs in prop::collection::vec("[a-e ]{0,30}|[文档记忆检索]{0,8}", 1..30), removed in prop::collection::vec(0u32..30, 0..10), query in "[a-e ]{1,10}") {
        let mut idx = Bm25Index::new(Bm25Params::default());
        for (i, d) in docs.iter().enumerate() {
            idx.add(i as u32, d).unwrap();
        }
        for r in removed {
            idx.remove(r);
        }
        let back = Bm25Index::from_bytes(&idx.to_bytes()).unwrap();
        prop_assert_eq!(back.len(), idx.len());
        let (a, b) = (idx.search(&query, 10), back.search(&query, 10));
        prop_assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            prop_assert_eq!(x.id, y.id);
            prop_assert!((x.score - y.score).abs() < 1e-5);
        }
    }
}
