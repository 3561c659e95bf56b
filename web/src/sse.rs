//! Server-Sent Events read from a byte stream: `event:` and `data:` lines, a blank line ending
//! each event (the only fields the server sends; comments, such as keep-alives, are skipped).

/// An event's name and data.
#[derive(Debug, PartialEq)]
pub struct SseEvent {
    pub name: String,
    pub data: String,
}

/// Takes bytes as they come and gives back the events they complete.
#[derive(Default)]
pub struct SseReader {
    pending: Vec<u8>,
    name: String,
    data: String,
}

impl SseReader {
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line[..end]);
            let line = line.strip_suffix('\r').unwrap_or(&line);
            if line.is_empty() {
                if !self.data.is_empty() || !self.name.is_empty() {
                    let name = std::mem::take(&mut self.name);
                    let name = if name.is_empty() { "message".into() } else { name };
                    events.push(SseEvent { name, data: std::mem::take(&mut self.data) });
                }
            } else if let Some(name) = line.strip_prefix("event:") {
                self.name = name.trim_start().to_string();
            } else if let Some(data) = line.strip_prefix("data:") {
                if !self.data.is_empty() {
                    self.data.push('\n');
                }
                self.data.push_str(data.strip_prefix(' ').unwrap_or(data));
            }
        }
        events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(name: &str, data: &str) -> SseEvent {
        SseEvent { name: name.into(), data: data.into() }
    }

    #[test]
    fn events_split_anywhere_come_out_whole_and_in_order() {
        let text = ": keep-alive\n\nevent: stage\ndata: {\"done\": 1}\n\nevent: saved\r\ndata: a\ndata: b\r\n\r\ndata: plain\n\n";
        let want = vec![event("stage", "{\"done\": 1}"), event("saved", "a\nb"), event("message", "plain")];
        for cut in 0..text.len() {
            let mut reader = SseReader::default();
            let mut got = reader.feed(&text.as_bytes()[..cut]);
            got.extend(reader.feed(&text.as_bytes()[cut..]));
            assert_eq!(got, want, "cut at {cut}");
        }
    }

    #[test]
    fn an_unfinished_event_waits_for_its_blank_line() {
        let mut reader = SseReader::default();
        assert!(reader.feed(b"event: stage\ndata: x\n").is_empty());
        assert_eq!(reader.feed(b"\n"), vec![event("stage", "x")]);
    }
}
