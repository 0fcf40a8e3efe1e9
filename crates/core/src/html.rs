//! Text from HTML, for documents dropped in as `.html`.
//!
//! Not a browser: enough to read articles and saved pages. Tags are removed, `script`,
//! `style`, `noscript`, `template`, `svg` and `head` contents are skipped, block elements
//! (`p`, `div`, headings, list items, table rows, `br`, ...) become line breaks so sentences
//! and paragraphs survive, runs of blank space fold, and character references are
//! decoded (named ones for the common cases, numeric ones all). The text keeps the page's
//! reading order; a citation points into this text, which is what the user sees.

use alloc::string::String;

const SKIP: [&str; 6] = ["script", "style", "noscript", "template", "svg", "head"];
const BLOCK: [&str; 28] = [
    "p",
    "div",
    "br",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "li",
    "ul",
    "ol",
    "tr",
    "table",
    "section",
    "article",
    "header",
    "footer",
    "blockquote",
    "pre",
    "hr",
    "dt",
    "dd",
    "figcaption",
    "main",
    "aside",
    "nav",
    "title",
];

fn entity(name: &str) -> Option<char> {
    if let Some(num) = name.strip_prefix('#') {
        let n = match num.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => num.parse().ok()?,
        };
        return char::from_u32(n);
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "mdash" => '—',
        "ndash" => '–',
        "hellip" => '…',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "copy" => '©',
        "eacute" => 'é',
        _ => return None,
    })
}

fn push_text(out: &mut String, text: &str) {
    let mut rest = text;
    while let Some(amp) = rest.find('&') {
        push_folded(out, &rest[..amp]);
        rest = &rest[amp..];
        let end = rest[1..].find(|c: char| c == ';' || c.is_whitespace() || c == '&').map(|i| i + 1);
        match end.filter(|&e| rest.as_bytes().get(e) == Some(&b';')).and_then(|e| entity(&rest[1..e]).map(|c| (c, e))) {
            Some((c, e)) => {
                let mut buf = [0u8; 4];
                push_folded(out, c.encode_utf8(&mut buf));
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    push_folded(out, rest);
}

/// Append with white space folded to single spaces (none at a line's start).
fn push_folded(out: &mut String, text: &str) {
    for c in text.chars() {
        if c.is_whitespace() {
            if !(out.is_empty() || out.ends_with(' ') || out.ends_with('\n')) {
                out.push(' ');
            }
        } else {
            out.push(c);
        }
    }
}

fn line_break(out: &mut String) {
    while out.ends_with(' ') {
        out.pop();
    }
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
}

/// The readable text of an HTML page.
pub fn html_to_text(html: &str) -> String {
    let mut out = String::new();
    let mut rest = html;
    let mut skip_until: Option<String> = None;
    while !rest.is_empty() {
        let Some(lt) = rest.find('<') else {
            if skip_until.is_none() {
                push_text(&mut out, rest);
            }
            break;
        };
        if skip_until.is_none() {
            push_text(&mut out, &rest[..lt]);
        }
        rest = &rest[lt..];
        if rest.starts_with("<!--") {
            rest = rest.find("-->").map_or("", |e| &rest[e + 3..]);
            continue;
        }
        let Some(gt) = rest.find('>') else { break };
        let tag = &rest[1..gt];
        rest = &rest[gt + 1..];
        let closing = tag.starts_with('/');
        let name: String =
            tag.trim_start_matches('/').chars().take_while(|c| c.is_ascii_alphanumeric()).flat_map(|c| c.to_lowercase()).collect();
        if let Some(until) = &skip_until {
            if closing && name == *until {
                skip_until = None;
            }
            continue;
        }
        if !closing && SKIP.contains(&name.as_str()) && !tag.ends_with('/') {
            skip_until = Some(name);
            continue;
        }
        // A list item or row ends where the next begins (or its list ends).
        let item = matches!(name.as_str(), "li" | "tr" | "dt" | "dd");
        if BLOCK.contains(&name.as_str()) && !(closing && item) {
            line_break(&mut out);
            if matches!(name.as_str(), "p" | "h1" | "h2" | "h3" | "h4" | "h5" | "h6" | "title") && closing {
                line_break(&mut out);
            }
        }
    }
    while out.ends_with(['\n', ' ']) {
        out.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_an_article() {
        let html = "<!doctype html><html><head><title>T</title><style>p{color:red}</style></head>\
            <body><h1>Printing   press</h1><!-- nav --><p>Caxton&nbsp;set up a press &amp; printed<br>books.</p>\
            <script>var x = '<p>no</p>';</script><ul><li>One &#8212; two</li><li>&#x4e2d;&lt;3&gt;</li></ul><p>Tom &amp Jerry</p></body></html>";
        assert_eq!(html_to_text(html), "Printing press\n\nCaxton set up a press & printed\nbooks.\n\nOne — two\n中<3>\n\nTom &amp Jerry");
    }

    #[test]
    fn never_panics_on_broken_markup() {
        for s in ["<", "<p", "a < b > c", "&", "&#xZZ;", "<script>unclosed", "<!-- open", "é<b>é</b>"] {
            let _ = html_to_text(s);
        }
        assert_eq!(html_to_text("a < b"), "a");
        assert_eq!(html_to_text("é<b>é</b>"), "éé");
    }
}
