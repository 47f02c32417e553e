//! Answers: a message on the task (`taskId` required, `contextId` must match)
//! whose `messageId` is the idempotency key ([`read_message`] reads it, pure;
//! [`answer`] finds the interaction, submits the answer and waits for the worker's
//! outcome). The worker reads the input against the interaction's kind
//! ([`holdpoint_domain::rules::read_answer`]).

use a2a_lf::{
    Message, Part, PartContent, Role, SendMessageRequest, SendMessageResponse, error_code,
};
use holdpoint_domain::rules::check_unnamed;
use holdpoint_domain::{
    AnswerCommand, AnswerInput, AnswerRoute, Command, CommandEnvelope, ContextId, EXTENSION_URI,
    ErrorCode, Event, EventData, EventKind, IdempotencyKey, InteractionId, OrgId, Remember, TaskId,
    TaskState as DTaskState,
};
use serde_json::Value;
use time::OffsetDateTime;

use super::call::{Ctx, check_history_length, parse_params, parse_task_id, to_json};
use super::error::RpcError;
use super::view::{TaskView, a2a_task, load_view};
use crate::state::AppState;

/// How a message answers: the interaction it names (if any) and the input.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// `metadata[URI].interactionId`, when the message names one.
    pub interaction: Option<InteractionId>,
    /// What the person sent.
    pub input: AnswerInput,
    /// `metadata[URI].remember`: write a remembered rule from this approval's
    /// decision (the worker refuses it on a question or a connection, `NRY-0025`).
    pub remember: Option<Remember>,
}

/// The fields an answer's `metadata[URI]` may hold (README "A2A"): the interaction
/// it answers, the answer (`approved` or `value`), and `reason`, `argumentsDigest`
/// and `remember` as the REST approve body takes them; any other is refused.
const META_FIELDS: [&str; 7] = [
    "interactionId",
    "approved",
    "value",
    "reason",
    "argumentsDigest",
    "editedArguments",
    "remember",
];

/// Reads an answer message (see the module docs). `extension` says whether the
/// interactions extension is active for it (activated by header, or listed in the
/// message's `extensions`). Pure: bad input is refused before anything is sent.
///
/// # Errors
/// Invalid params for a message that cannot answer; `ContentTypeNotSupportedError`
/// for file parts.
/// A message whose metadata decides one thing and whose data part another (a
/// data part `{"approved": false}` under metadata `approved: true`, or two
/// different values) is refused rather than read by precedence: the person's
/// client said two things, and which one it showed them is not known. A text
/// part beside the metadata is a comment and never contradicts it.
fn refuse_contradicting_parts(input: &AnswerInput, parts: &[Part]) -> Result<(), RpcError> {
    if parts.is_empty() || matches!(input, AnswerInput::Text { .. }) {
        return Ok(());
    }
    let Ok(from_parts) = read_parts(parts) else {
        return Ok(());
    };
    let contradicts = match (input, &from_parts) {
        (AnswerInput::Approved { approved: a, .. }, AnswerInput::Approved { approved: b, .. }) => {
            a != b
        }
        (AnswerInput::Value { value: v, .. }, AnswerInput::Value { value: w, .. }) => v != w,
        (AnswerInput::Value { value: v, .. }, AnswerInput::Approved { approved: b, .. }) => {
            *v != Value::Bool(*b)
        }
        _ => false,
    };
    if contradicts {
        return Err(RpcError::invalid_params(format!(
            "the message's metadata[{EXTENSION_URI}] and its data part give two different \
             answers; send one (nothing was decided)"
        )));
    }
    Ok(())
}

pub fn read_message(msg: &Message, extension: bool) -> Result<Reading, RpcError> {
    let meta = msg.metadata.as_ref().and_then(|m| m.get(EXTENSION_URI));
    let Some(meta) = meta else {
        return Ok(Reading {
            interaction: None,
            input: read_parts(&msg.parts)?,
            remember: None,
        });
    };
    if !extension {
        return Err(RpcError::invalid_params(format!(
            "the message carries metadata under {EXTENSION_URI}: activate the extension \
             (A2A-Extensions header) or list it in the message's extensions"
        )));
    }
    let Some(obj) = meta.as_object() else {
        return Err(RpcError::invalid_params(format!(
            "metadata[{EXTENSION_URI}] must be an object"
        )));
    };
    if let Some(unknown) = obj.keys().find(|k| !META_FIELDS.contains(&k.as_str())) {
        return Err(RpcError::invalid_params(format!(
            "metadata[{EXTENSION_URI}] has an unknown field {unknown:?}; it takes interactionId \
             and approved or value (and an optional reason, argumentsDigest, editedArguments \
             and remember)"
        )));
    }
    let interaction = match obj.get("interactionId") {
        None => None,
        Some(Value::String(s)) => Some(
            InteractionId::parse(s.clone())
                .map_err(|e| RpcError::invalid_params(format!("invalid interactionId: {e}")))?,
        ),
        Some(_) => return Err(RpcError::invalid_params("interactionId must be a string")),
    };
    let reason = match obj.get("reason") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(RpcError::invalid_params("reason must be a string")),
    };
    let digest = match obj.get("argumentsDigest") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(_) => return Err(RpcError::invalid_params("argumentsDigest must be a string")),
    };
    let remember = match obj.get("remember") {
        None | Some(Value::Null) => None,
        Some(v) => {
            let r: Remember = serde_json::from_value(v.clone()).map_err(|e| {
                RpcError::invalid_params(format!(
                    "remember must be {{scope: session|agent|organisation, expiresIn?: seconds, \
                     argumentsDigest?: true|digest}}: {e}"
                ))
            })?;
            r.check()
                .map_err(|e| RpcError::invalid_params(e.message.clone()))?;
            Some(r)
        }
    };
    let mut input = match (obj.get("approved"), obj.get("value")) {
        (Some(_), Some(_)) => {
            return Err(RpcError::invalid_params(
                "give either approved or value, not both",
            ));
        }
        (Some(Value::Bool(approved)), None) => AnswerInput::Approved {
            approved: *approved,
            reason,
            arguments_digest: None,
            edited_arguments: None,
        },
        (Some(_), None) => return Err(RpcError::invalid_params("approved must be a boolean")),
        (None, Some(value)) => AnswerInput::Value {
            value: value.clone(),
            reason,
        },
        (None, None) => read_parts(&msg.parts)?,
    };
    refuse_contradicting_parts(&input, &msg.parts)?;
    // Edit, then approve: the worker checks the edit against the hold (NRY-0028,
    // NRY-0029) and the digest against the held arguments (NRY-0010).
    if let Some(edit) = obj.get("editedArguments") {
        match &mut input {
            AnswerInput::Approved {
                edited_arguments, ..
            } => *edited_arguments = Some(edit.clone()),
            _ => {
                return Err(RpcError::invalid_params(
                    "editedArguments come with approved: true (and argumentsDigest)",
                ));
            }
        }
    }
    // Binds an approval decision to the arguments the person saw, as in REST: the
    // worker answers `NRY-0010` (invalid params) when the held ones differ.
    if let Some(digest) = digest {
        match &mut input {
            AnswerInput::Approved {
                arguments_digest, ..
            } => *arguments_digest = Some(digest),
            _ => {
                return Err(RpcError::invalid_params(
                    "argumentsDigest binds an approval decision: give it with approved",
                ));
            }
        }
    }
    Ok(Reading {
        interaction,
        input,
        remember,
    })
}

fn read_parts(parts: &[Part]) -> Result<AnswerInput, RpcError> {
    if parts
        .iter()
        .any(|p| matches!(p.content, PartContent::Raw(_) | PartContent::Url(_)))
    {
        return Err(RpcError::new(
            error_code::CONTENT_TYPE_NOT_SUPPORTED,
            "file parts cannot answer an interaction; send one text or data part",
        ));
    }
    let [part] = parts else {
        return Err(RpcError::invalid_params(format!(
            "send exactly one text or data part (got {})",
            parts.len()
        )));
    };
    Ok(match &part.content {
        PartContent::Text(text) => AnswerInput::Text { text: text.clone() },
        PartContent::Data(value) => match value.as_object() {
            Some(o)
                if o.get("approved").is_some_and(Value::is_boolean)
                    && o.keys().all(|k| k == "approved" || k == "reason")
                    && o.get("reason").is_none_or(Value::is_string) =>
            {
                AnswerInput::Approved {
                    approved: o.get("approved").and_then(Value::as_bool).unwrap_or(false),
                    reason: o.get("reason").and_then(Value::as_str).map(str::to_owned),
                    arguments_digest: None,
                    edited_arguments: None,
                }
            }
            _ => AnswerInput::Value {
                value: value.clone(),
                reason: None,
            },
        },
        PartContent::Raw(_) | PartContent::Url(_) => {
            return Err(RpcError::new(
                error_code::CONTENT_TYPE_NOT_SUPPORTED,
                "file parts cannot answer an interaction",
            ));
        }
    })
}

/// Reads every `interaction-resolved` event of the task and returns the
/// interaction the key `key` resolved, if any: a retry of an answer that did not
/// name its interaction goes back to the one it answered.
async fn resolved_by_key(
    state: &AppState,
    org: &OrgId,
    task: &TaskId,
    key: &IdempotencyKey,
) -> Result<Option<InteractionId>, RpcError> {
    let stored = state
        .bus
        .task_events(org, task, EventKind::InteractionResolved.name())
        .await
        .map_err(RpcError::unavailable)?;
    Ok(stored
        .iter()
        .rev()
        .find_map(|s| match serde_json::from_slice::<Event>(&s.payload) {
            Ok(Event {
                body:
                    EventData::InteractionResolved {
                        interaction_id,
                        key: k,
                        ..
                    },
                ..
            }) if &k == key => Some(interaction_id),
            _ => None,
        }))
}

/// Answers the task with `msg`: validates, finds the interaction (the one named,
/// else the one the task waits on: its oldest pending), submits the answer and waits
/// for the worker's outcome. Returns the task as it now is: waiting on its next
/// pending interaction, or `TASK_STATE_WORKING` when none is left.
pub async fn answer(ctx: &Ctx, req: SendMessageRequest) -> Result<TaskView, RpcError> {
    check_history_length(req.configuration.as_ref().and_then(|c| c.history_length))?;
    let msg = req.message;
    if msg.role != Role::User {
        return Err(RpcError::invalid_params(
            "an answer comes from the person: role must be ROLE_USER",
        ));
    }
    let key = IdempotencyKey::parse(msg.message_id.clone()).map_err(|_| {
        RpcError::invalid_params("messageId must be 1 to 128 printable ASCII characters")
    })?;
    let Some(raw_task) = msg.task_id.clone() else {
        return Err(RpcError::invalid_params(
            "taskId is required: Holdpoint only answers tasks that wait for a person",
        ));
    };
    let task = parse_task_id(raw_task)?;
    let context = match msg.context_id.clone() {
        Some(c) => Some(
            ContextId::parse(c)
                .map_err(|e| RpcError::invalid_params(format!("invalid contextId: {e}")))?,
        ),
        None => None,
    };
    let listed = msg
        .extensions
        .as_ref()
        .is_some_and(|l| l.iter().any(|u| u == EXTENSION_URI));
    let reading = read_message(&msg, ctx.negotiated.interactions() || listed)?;

    let org = &ctx.caller.org;
    let Some(view) = load_view(&ctx.state, org, &task).await? else {
        return Err(RpcError::task_not_found(task.as_str()));
    };
    if context.as_ref().is_some_and(|c| c != &view.context_id) {
        return Err(RpcError::invalid_params(
            "contextId does not match the task's context",
        ));
    }
    let open = view
        .interaction
        .as_ref()
        .filter(|_| view.waiting())
        .map(|o| o.interaction_id.clone());
    let target = match reading.interaction {
        Some(named) if open.as_ref() == Some(&named) => named,
        Some(named) => {
            // Not the open one: an earlier interaction of this task (the worker
            // replays or refuses), else an error; never a new message.
            let loaded = ctx
                .state
                .bus
                .load_interaction(org, &named)
                .await
                .map_err(RpcError::unavailable)?;
            match loaded.value {
                Some(i) if i.task_id == task => named,
                _ => {
                    return Err(RpcError::invalid_params(format!(
                        "interaction {named} is not one of task {task}'s"
                    ))
                    .with_code(ErrorCode::NotFound));
                }
            }
        }
        // A retry of an answer that named nothing goes back to what its key resolved
        // (the worker replays it); a new one goes to the interaction the task waits
        // for, which it may decide only when that is a question, or an approval
        // bound by its arguments' digest (`rules::check_unnamed`).
        None => match resolved_by_key(&ctx.state, org, &task, &key).await? {
            Some(previous) => previous,
            None => match &view.interaction {
                Some(waiting) if view.waiting() => {
                    check_unnamed(waiting.kind, &reading.input)
                        .map_err(RpcError::from_rejection)?;
                    waiting.interaction_id.clone()
                }
                _ => {
                    return Err(RpcError::invalid_params(format!(
                        "task {task} waits for no answer now (it is working)"
                    ))
                    .with_code(ErrorCode::AlreadySettled));
                }
            },
        },
    };
    let env = CommandEnvelope {
        org: org.clone(),
        command: Command::Answer(Box::new(AnswerCommand {
            interaction_id: target,
            route: AnswerRoute::A2a,
            key,
            by: ctx.caller.person.clone(),
            groups: ctx.caller.groups.clone(),
            task_id: Some(task.clone()),
            context_id: Some(context.unwrap_or_else(|| view.context_id.clone())),
            input: reading.input,
            remember: reading.remember,
        })),
    };
    let outcome = ctx
        .state
        .outcomes
        .submit_traced(
            &ctx.state.bus,
            &env,
            ctx.state.cfg.outcome_timeout,
            ctx.traceparent.as_deref(),
        )
        .await
        .map_err(RpcError::unavailable)?;
    if let Err(r) = outcome.result {
        return Err(RpcError::from_rejection(r));
    }
    // The task as it is now: waiting on its next pending interaction, if any.
    let after = load_view(&ctx.state, org, &task).await?;
    Ok(after.unwrap_or(TaskView {
        task_id: task,
        context_id: view.context_id,
        state: DTaskState::Working,
        interaction: None,
        at: OffsetDateTime::now_utc(),
        sequence: 0,
    }))
}

/// `SendMessage`: answers, returns `{"task": …}` as the task now is: waiting on its
/// next pending interaction, else `TASK_STATE_WORKING`.
pub async fn send_message(ctx: &Ctx, params: Value) -> Result<Value, RpcError> {
    let req: SendMessageRequest = parse_params(params)?;
    let view = answer(ctx, req).await?;
    to_json(&SendMessageResponse::Task(a2a_task(
        &view,
        ctx.negotiated.interactions(),
    )))
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use serde_json::json;

    fn msg(parts: Vec<Part>, meta: Option<Value>) -> Message {
        Message {
            message_id: "m-1".into(),
            context_id: None,
            task_id: Some("t1".into()),
            role: Role::User,
            parts,
            metadata: meta.map(|m| HashMap::from([(EXTENSION_URI.to_owned(), m)])),
            extensions: None,
            reference_task_ids: None,
        }
    }

    #[test]
    fn parts_are_read_by_the_reading_rules() {
        let r = read_message(
            &msg(vec![Part::data(json!({"approved": true}))], None),
            false,
        )
        .expect("reads");
        assert!(matches!(
            r.input,
            AnswerInput::Approved { approved: true, .. }
        ));
        let r = read_message(
            &msg(vec![Part::data(json!({"connected": true}))], None),
            false,
        )
        .expect("reads");
        assert_eq!(
            r.input,
            AnswerInput::Value {
                value: json!({"connected": true}),
                reason: None
            }
        );
        let r = read_message(&msg(vec![Part::text("main")], None), false).expect("reads");
        assert_eq!(
            r.input,
            AnswerInput::Text {
                text: "main".into()
            }
        );
        assert!(read_message(&msg(vec![], None), false).is_err());
        assert!(read_message(&msg(vec![Part::text("a"), Part::text("b")], None), false).is_err());
        let e = read_message(&msg(vec![Part::url("https://x")], None), false).expect_err("file");
        assert_eq!(e.code, error_code::CONTENT_TYPE_NOT_SUPPORTED);
    }

    #[test]
    fn arguments_digest_binds_an_approval() {
        let m = msg(
            vec![],
            Some(json!({"interactionId": "eff_1", "approved": true, "argumentsDigest": "abc"})),
        );
        let r = read_message(&m, true).expect("reads");
        assert_eq!(
            r.input,
            AnswerInput::Approved {
                approved: true,
                reason: None,
                arguments_digest: Some("abc".into()),
                edited_arguments: None,
            }
        );
        // With a data part `{"approved": …}` too.
        let m = msg(
            vec![Part::data(json!({"approved": false}))],
            Some(json!({"interactionId": "eff_1", "argumentsDigest": "abc"})),
        );
        assert!(matches!(
            read_message(&m, true).expect("reads").input,
            AnswerInput::Approved {
                approved: false,
                arguments_digest: Some(_),
                ..
            }
        ));
        for bad in [
            json!({"interactionId": "q1", "value": 1, "argumentsDigest": "abc"}),
            json!({"interactionId": "eff_1", "approved": true, "argumentsDigest": 7}),
        ] {
            assert!(
                read_message(&msg(vec![], Some(bad.clone())), true).is_err(),
                "{bad}"
            );
        }
        let text = msg(
            vec![Part::text("yes")],
            Some(json!({"interactionId": "eff_1", "argumentsDigest": "abc"})),
        );
        assert!(read_message(&text, true).is_err());
    }

    #[test]
    fn extension_metadata_names_the_interaction() {
        // Metadata and a data part that say two things: refused, not read by
        // precedence; the same thing twice, or a text comment beside it, reads.
        for (part, meta) in [
            (
                Part::data(json!({"approved": false})),
                json!({"interactionId": "eff_1", "approved": true}),
            ),
            (
                Part::data(json!({"approved": true})),
                json!({"interactionId": "q1", "value": {"seats": 5}}),
            ),
            (
                Part::data(json!({"seats": 4})),
                json!({"interactionId": "q1", "value": {"seats": 5}}),
            ),
        ] {
            let e = read_message(&msg(vec![part], Some(meta.clone())), true);
            assert!(e.is_err(), "{meta}");
        }
        let agrees = msg(
            vec![Part::data(json!({"seats": 5}))],
            Some(json!({"interactionId": "q1", "value": {"seats": 5}})),
        );
        assert!(read_message(&agrees, true).is_ok());
        let comment = msg(
            vec![Part::text("looks fine")],
            Some(json!({"interactionId": "eff_1", "approved": true})),
        );
        assert!(read_message(&comment, true).is_ok());
        let m = msg(
            vec![Part::data(json!({"approved": true}))],
            Some(json!({"interactionId": "eff_1", "approved": true})),
        );
        let r = read_message(&m, true).expect("reads");
        assert_eq!(
            r.interaction.as_ref().map(InteractionId::as_str),
            Some("eff_1")
        );
        assert!(matches!(
            r.input,
            AnswerInput::Approved { approved: true, .. }
        ));
        // Not activated: refused, not silently read otherwise.
        assert!(read_message(&m, false).is_err());
        for bad in [
            json!({"interactionId": "eff_1", "approved": "yes"}),
            json!({"interactionId": "eff_1", "approved": true, "value": 1}),
            json!({"interactionId": 7, "approved": true}),
            json!({"interactionId": "eff_1", "approved": true, "extra": 1}),
            json!("eff_1"),
        ] {
            assert!(
                read_message(&msg(vec![], Some(bad.clone())), true).is_err(),
                "{bad}"
            );
        }
        let r = read_message(
            &msg(vec![Part::text("x")], Some(json!({"interactionId": "q1"}))),
            true,
        )
        .expect("reads");
        assert_eq!(r.input, AnswerInput::Text { text: "x".into() });
    }
}
