//! The child → parent line protocol.

use baton_conformance::runner::protocol::{Message, PluginInfo, PREFIX};
use baton_conformance::{CaseResult, Class};

#[test]
fn messages_round_trip_and_noise_is_ignored() {
    let mut r = CaseResult::new(
        "Relu/f32/7",
        "Relu",
        "op",
        Some("f32"),
        Class::Mismatch,
        "x\ny",
    );
    r.max_abs_err = Some(0.5);
    r.got = Some("NaN".into());
    for msg in [
        Message::Start {
            id: "Relu/f32/7".into(),
        },
        Message::Done {
            result: Box::new(r),
        },
        Message::Plugin {
            info: PluginInfo {
                name: Some("p".into()),
                ..PluginInfo::default()
            },
        },
    ] {
        let line = msg.to_line();
        assert!(line.starts_with(PREFIX) && !line.contains('\n'));
        assert_eq!(Message::parse(&line).unwrap().unwrap(), msg);
        // A plugin's unterminated stdout output in front does not hide the message.
        let glued = format!("plugin says hi{line}");
        assert_eq!(Message::parse(&glued).unwrap().unwrap(), msg);
    }
    assert!(Message::parse("just plugin noise").is_none());
    assert!(Message::parse(&format!("{PREFIX}{{not json"))
        .unwrap()
        .is_err());
}
