//! The SQuAD JSON layout: articles of paragraphs of questions. Each article becomes one
//! document (paragraph contexts joined by a blank line), and each answerable question
//! keeps its gold answers.

use serde::Deserialize;

use docmem_core::document::Document;
use docmem_core::span::Span;

#[derive(Deserialize)]
struct File {
    data: Vec<Article>,
}

#[derive(Deserialize)]
struct Article {
    title: String,
    paragraphs: Vec<Paragraph>,
}

#[derive(Deserialize)]
struct Paragraph {
    context: String,
    qas: Vec<Qa>,
}

#[derive(Deserialize)]
struct Qa {
    #[serde(default)]
    id: String,
    question: String,
    #[serde(default)]
    answers: Vec<AnswerText>,
    #[serde(default)]
    is_impossible: bool,
}

#[derive(Deserialize)]
struct AnswerText {
    text: String,
}

/// A question with its gold answers (empty for an unanswerable one).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    /// SQuAD's question id (the question text when the file has none).
    pub id: String,
    /// The question.
    pub question: String,
    /// Gold answer strings (deduplicated).
    pub answers: Vec<String>,
    /// Index of the article (document) it was asked about.
    pub document: usize,
    /// Where the question's own paragraph lies in that document's text (the context it
    /// was written from).
    pub paragraph: Span,
}

/// One document per article and every question, in file order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SquadSet {
    /// Documents.
    pub documents: Vec<Document>,
    /// Questions.
    pub questions: Vec<Question>,
}

impl SquadSet {
    /// Each document's side of the split ([`super::group_splits`], an article a group
    /// keyed by its title, weighed by its questions), in the order of `documents`.
    pub fn sides(&self) -> Vec<super::Split> {
        let mut counts = vec![0usize; self.documents.len()];
        for q in &self.questions {
            if let Some(c) = counts.get_mut(q.document) {
                *c += 1;
            }
        }
        let groups: Vec<(&str, usize)> = self.documents.iter().zip(&counts).map(|(d, &n)| (d.title.as_str(), n)).collect();
        super::group_splits(&groups)
    }
}

/// Parse a SQuAD v1/v2 file.
pub fn parse_squad(json: &[u8]) -> Result<SquadSet, serde_json::Error> {
    let file: File = serde_json::from_slice(json)?;
    let mut documents = Vec::new();
    let mut questions = Vec::new();
    for (i, a) in file.data.into_iter().enumerate() {
        let mut text = String::new();
        for p in &a.paragraphs {
            if !text.is_empty() {
                text.push_str("\n\n");
            }
            let paragraph = Span::new(text.len(), text.len() + p.context.len());
            text.push_str(&p.context);
            for q in &p.qas {
                let mut answers: Vec<String> = Vec::new();
                if !q.is_impossible {
                    for t in &q.answers {
                        if !answers.contains(&t.text) {
                            answers.push(t.text.clone());
                        }
                    }
                }
                let id = if q.id.is_empty() { q.question.clone() } else { q.id.clone() };
                questions.push(Question { id, question: q.question.clone(), answers, document: i, paragraph });
            }
        }
        documents.push(Document::new(a.title, text));
    }
    Ok(SquadSet { documents, questions })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn articles_become_documents() {
        let json = br#"{"version":"v2.0","data":[{"title":"Normans","paragraphs":[
            {"context":"The Normans were a people.","qas":[{"question":"Who?","id":"1","answers":[{"text":"Normans","answer_start":4},{"text":"Normans","answer_start":4}],"is_impossible":false}]},
            {"context":"They lived in France.","qas":[{"question":"Where not?","id":"2","answers":[],"plausible_answers":[{"text":"x","answer_start":0}],"is_impossible":true}]}]}]}"#;
        let s = parse_squad(json).unwrap();
        assert_eq!(s.documents.len(), 1);
        assert_eq!(s.documents[0].text, "The Normans were a people.\n\nThey lived in France.");
        assert_eq!(s.documents[0].title, "Normans");
        assert_eq!(s.questions[0].answers, ["Normans"]);
        assert_eq!((s.questions[0].id.as_str(), s.questions[1].id.as_str()), ("1", "2"));
        assert!(s.questions[1].answers.is_empty());
        assert_eq!(s.questions[1].paragraph.slice(&s.documents[0].text), Some("They lived in France."));
        assert!(parse_squad(b"{}").is_err());
        assert_eq!(s.sides().len(), 1);
    }
}
