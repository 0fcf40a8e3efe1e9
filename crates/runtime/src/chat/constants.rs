//! Refuses templates whose constant expressions would be huge when compiled.
//!
//! minijinja folds expressions made only of literals while it compiles a template, before
//! any render and so before the byte meter ([`super::meter`]) can see them: `'x' * 10**8`
//! becomes a 100 MB string, `['x'] * 10**8` a hundred million values. Only repetition (and
//! the integer arithmetic that makes its count) can make a folded value much larger than the
//! template's own text, so the parsed template is walked and every constant expression's
//! size is bounded, without evaluating it, before minijinja compiles it.

use minijinja::machinery::ast::{self, BinOpKind, CallArg, Expr, Stmt, UnaryOpKind};

/// Bytes a folded constant may hold; real templates' constants are a few words.
pub(super) const MAX_CONSTANT_BYTES: u64 = 1 << 20;

/// What a constant expression may become: its integer value when it is one, and a bound on
/// its size in bytes (elements count [`super::meter`]'s 32 bytes each).
#[derive(Clone, Copy)]
struct Folded {
    int: Option<i128>,
    bytes: u64,
}

fn folded(expr: &Expr<'_>) -> Option<Folded> {
    const ELEMENT: u64 = 32;
    Some(match expr {
        Expr::Const(c) => {
            let value = &c.value;
            let int = if value.is_integer() { i128::try_from(value.clone()).ok() } else { None };
            let bytes = value.as_str().map_or(16, |s| s.len() as u64);
            Folded { int, bytes }
        }
        Expr::List(l) => {
            let mut bytes = 0u64;
            for item in &l.items {
                bytes = bytes.saturating_add(folded(item)?.bytes).saturating_add(ELEMENT);
            }
            Folded { int: None, bytes }
        }
        Expr::Map(m) => {
            let mut bytes = 0u64;
            for item in m.keys.iter().chain(&m.values) {
                bytes = bytes.saturating_add(folded(item)?.bytes).saturating_add(ELEMENT);
            }
            Folded { int: None, bytes }
        }
        Expr::UnaryOp(u) => {
            let inner = folded(&u.expr)?;
            match u.op {
                UnaryOpKind::Neg => Folded { int: inner.int.and_then(i128::checked_neg), bytes: inner.bytes },
                UnaryOpKind::Not => Folded { int: None, bytes: 8 },
            }
        }
        Expr::BinOp(b) => {
            let (l, r) = (folded(&b.left)?, folded(&b.right)?);
            let ints = l.int.zip(r.int);
            let sum = l.bytes.saturating_add(r.bytes);
            match b.op {
                BinOpKind::Mul => {
                    let times = |n: Option<i128>| n.map_or(0, |n| u64::try_from(n.unsigned_abs()).unwrap_or(u64::MAX));
                    let bytes = l
                        .bytes
                        .saturating_add(ELEMENT)
                        .saturating_mul(times(r.int))
                        .max(r.bytes.saturating_add(ELEMENT).saturating_mul(times(l.int)));
                    Folded { int: ints.and_then(|(a, b)| a.checked_mul(b)), bytes: bytes.max(sum) }
                }
                BinOpKind::Pow => {
                    let int = ints.and_then(|(a, b)| u32::try_from(b).ok().and_then(|b| a.checked_pow(b)));
                    // An overflowing power is an error, not a value, when minijinja folds it;
                    // as a count it would be unbounded, so it is taken as one.
                    Folded { int, bytes: if ints.is_some() && int.is_none() { u64::MAX } else { 16 } }
                }
                BinOpKind::Add => Folded { int: ints.and_then(|(a, b)| a.checked_add(b)), bytes: sum },
                BinOpKind::Sub => Folded { int: ints.and_then(|(a, b)| a.checked_sub(b)), bytes: sum },
                BinOpKind::Div | BinOpKind::FloorDiv | BinOpKind::Rem => {
                    // never larger in magnitude than the dividend (or the divisor, for `%`)
                    Folded { int: ints.map(|(a, b)| if b == 0 { a } else { a.abs().max(b.abs()) }), bytes: sum }
                }
                BinOpKind::Concat | BinOpKind::ScAnd | BinOpKind::ScOr => Folded { int: l.int.or(r.int), bytes: sum },
                BinOpKind::Eq | BinOpKind::Ne | BinOpKind::Lt | BinOpKind::Lte | BinOpKind::Gt | BinOpKind::Gte | BinOpKind::In => {
                    Folded { int: None, bytes: 8 }
                }
            }
        }
        Expr::Compare(c) => {
            folded(&c.expr)?;
            for op in &c.ops {
                folded(&op.expr)?;
            }
            Folded { int: None, bytes: 8 }
        }
        _ => return None,
    })
}

/// The first constant expression in `stmt` that could fold to more than `limit` bytes, as its
/// line in the template.
pub(super) fn huge_constant(stmt: &Stmt<'_>, limit: u64) -> Option<usize> {
    let mut walker = Walker { limit, found: None };
    walker.stmt(stmt);
    walker.found
}

struct Walker {
    limit: u64,
    found: Option<usize>,
}

impl Walker {
    fn stmts(&mut self, stmts: &[Stmt<'_>]) {
        for s in stmts {
            self.stmt(s);
        }
    }

    fn stmt(&mut self, stmt: &Stmt<'_>) {
        if self.found.is_some() {
            return;
        }
        match stmt {
            Stmt::Template(t) => self.stmts(&t.children),
            Stmt::EmitExpr(e) => self.expr(&e.expr),
            Stmt::EmitRaw(_) | Stmt::Continue(_) | Stmt::Break(_) => {}
            Stmt::ForLoop(f) => {
                self.expr(&f.target);
                self.expr(&f.iter);
                if let Some(e) = &f.filter_expr {
                    self.expr(e);
                }
                self.stmts(&f.body);
                self.stmts(&f.else_body);
            }
            Stmt::IfCond(i) => {
                self.expr(&i.expr);
                self.stmts(&i.true_body);
                self.stmts(&i.false_body);
            }
            Stmt::WithBlock(w) => {
                for (target, value) in &w.assignments {
                    self.expr(target);
                    self.expr(value);
                }
                self.stmts(&w.body);
            }
            Stmt::Set(s) => {
                self.expr(&s.target);
                self.expr(&s.expr);
            }
            Stmt::SetBlock(s) => {
                self.expr(&s.target);
                if let Some(f) = &s.filter {
                    self.expr(f);
                }
                self.stmts(&s.body);
            }
            Stmt::AutoEscape(a) => {
                self.expr(&a.enabled);
                self.stmts(&a.body);
            }
            Stmt::FilterBlock(f) => {
                self.expr(&f.filter);
                self.stmts(&f.body);
            }
            Stmt::Block(b) => self.stmts(&b.body),
            Stmt::Import(i) => {
                self.expr(&i.expr);
                self.expr(&i.name);
            }
            Stmt::FromImport(i) => self.expr(&i.expr),
            Stmt::Extends(e) => self.expr(&e.name),
            Stmt::Include(i) => self.expr(&i.name),
            Stmt::Macro(m) => self.macro_decl(m),
            Stmt::CallBlock(c) => {
                self.call(&c.call);
                self.macro_decl(&c.macro_decl);
            }
            Stmt::Do(d) => self.call(&d.call),
        }
    }

    fn macro_decl(&mut self, m: &ast::Macro<'_>) {
        for e in m.args.iter().chain(&m.defaults) {
            self.expr(e);
        }
        self.stmts(&m.body);
    }

    fn call(&mut self, c: &ast::Call<'_>) {
        self.expr(&c.expr);
        self.args(&c.args);
    }

    fn args(&mut self, args: &[CallArg<'_>]) {
        for a in args {
            match a {
                CallArg::Pos(e) | CallArg::Kwarg(_, e) | CallArg::PosSplat(e) | CallArg::KwargSplat(e) => self.expr(e),
            }
        }
    }

    fn expr(&mut self, expr: &Expr<'_>) {
        if self.found.is_some() {
            return;
        }
        // The compiler folds the outermost constant expression whole.
        if let Some(f) = folded(expr) {
            if f.bytes > self.limit {
                self.found = Some(expr.span().start_line as usize);
            }
            return;
        }
        match expr {
            Expr::Var(_) | Expr::Const(_) => {}
            Expr::Slice(s) => {
                self.expr(&s.expr);
                for e in [&s.start, &s.stop, &s.step].into_iter().flatten() {
                    self.expr(e);
                }
            }
            Expr::UnaryOp(u) => self.expr(&u.expr),
            Expr::BinOp(b) => {
                self.expr(&b.left);
                self.expr(&b.right);
            }
            Expr::Compare(c) => {
                self.expr(&c.expr);
                for op in &c.ops {
                    self.expr(&op.expr);
                }
            }
            Expr::IfExpr(i) => {
                self.expr(&i.test_expr);
                self.expr(&i.true_expr);
                if let Some(e) = &i.false_expr {
                    self.expr(e);
                }
            }
            Expr::Filter(f) => {
                if let Some(e) = &f.expr {
                    self.expr(e);
                }
                self.args(&f.args);
            }
            Expr::Test(t) => {
                self.expr(&t.expr);
                self.args(&t.args);
            }
            Expr::GetAttr(g) => self.expr(&g.expr),
            Expr::GetItem(g) => {
                self.expr(&g.expr);
                self.expr(&g.subscript_expr);
            }
            Expr::Call(c) => self.call(c),
            Expr::List(l) => {
                for e in &l.items {
                    self.expr(e);
                }
            }
            Expr::Map(m) => {
                for e in m.keys.iter().chain(&m.values) {
                    self.expr(e);
                }
            }
        }
    }
}
