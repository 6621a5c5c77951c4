//! The `/dlq` page over a real Postgres and LocalStack's SQS: real messages on a real DLQ,
//! classified as `rara dlq list` classifies them; purge removes the stale one, redrive sends the
//! live one and rara's own dead-letter back to the step queue; each form needs the session and
//! its CSRF token and says what it changed. An anonymous reader reads nothing (a read receives);
//! without a DLQ configured the page says so.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use axum::http::{Method, StatusCode};
use common::{Client, api, csrf_of, page};
use rara_platform::dlq::SqsDeadLetters;
use rara_queue::Queue;
use rara_queue::sqs::SqsQueue;
use rara_testkit::Queues;
use sqlx::PgPool;
use uuid::Uuid;

/// The text of the `#done` (or `#refused`) panel of a page.
fn said(html: &str) -> String {
    let at = html.find(r#"id="done""#).or(html.find(r#"id="refused""#)).expect("a panel that says what happened");
    let inner = &html[at..];
    inner[inner.find('>').unwrap() + 1..inner.find("</div>").unwrap()].to_owned()
}

/// The `data-state` of each entry row, sorted.
fn states(html: &str) -> Vec<String> {
    let mut states: Vec<String> = html
        .split(r#"<tr class="entry""#)
        .skip(1)
        .map(|row| {
            let at = row.find(r#"data-state=""#).unwrap() + r#"data-state=""#.len();
            row[at..at + row[at..].find('"').unwrap()].to_owned()
        })
        .collect();
    states.sort();
    states
}

fn body(step: Uuid, token: Uuid) -> String {
    format!(r#"{{"v":1,"step_id":"{step}","lease_token":"{token}"}}"#)
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn the_dlq_page_classifies_real_dead_letters_purges_the_stale_and_redrives_the_live(pool: PgPool) {
    let queues = Queues::new(30, 1).await;
    let dead = SqsDeadLetters {
        dlq: SqsQueue::new(queues.client.clone(), queues.dlq_url.clone(), None),
        queue: SqsQueue::new(queues.client.clone(), queues.url.clone(), None),
        store: rara_store::Store::new(pool.clone()),
    };
    let client = Client { router: api(pool.clone()).with_dead_letters(std::sync::Arc::new(dead)).router() };
    client.submit_demo().await;
    let store = rara_store::Store::new(pool.clone());
    let leased = store.lease_due("test-scheduler", 10, std::time::Duration::from_secs(600)).await.unwrap();
    let live = &leased[0];
    // On the DLQ: a message its leased step waits for (live), one for the same step under an
    // older lease (stale), rara's own dead-letter with its reason, one for no known step.
    let send = |text: String| {
        let (client, url) = (queues.client.clone(), queues.dlq_url.clone());
        async move { client.send_message().queue_url(url).message_body(text).send().await.unwrap() }
    };
    send(body(live.step_id, live.lease_token)).await;
    send(body(live.step_id, Uuid::new_v4())).await;
    send(body(Uuid::new_v4(), Uuid::new_v4())).await;
    queues.queue().dead_letter("oops", "MALFORMED_MESSAGE", "not JSON").await.unwrap();

    // Reading receives the messages: an anonymous reader is not shown them.
    let (status, _, anonymous) = page(&client, Method::GET, "/dlq", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(anonymous.contains(r#"id="sign-in""#) && states(&anonymous).is_empty(), "{anonymous}");
    let session = client.session().await;
    let cookie = Some(session.as_str());
    let (_, _, html) = page(&client, Method::GET, "/dlq", cookie, None).await;
    assert_eq!(states(&html), ["live", "rejected", "stale", "unknown"], "{html}");
    assert!(html.contains("MALFORMED_MESSAGE: not JSON"));
    let csrf = csrf_of(&html);
    assert!(html.contains("data-confirm="), "each action asks first");
    let form = |action: &str, csrf: &str| Some(format!("csrf={csrf}&action={action}"));

    let (status, _, _) = page(&client, Method::POST, "/dlq/action", cookie, form("purge", "forged")).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    let (status, _, html) = page(&client, Method::POST, "/dlq/action", cookie, form("purge", &csrf)).await;
    assert_eq!(status, StatusCode::OK, "{html}");
    assert!(said(&html).contains("Removed 1 stale message(s) from the DLQ; 3 other(s) stay."), "{}", said(&html));
    assert_eq!(states(&html), ["live", "rejected", "unknown"], "the page after the purge");

    let (_, _, html) = page(&client, Method::POST, "/dlq/action", cookie, form("redrive", &csrf)).await;
    let text = said(&html);
    assert!(
        text.contains("Moved 2 message(s) back to the step queue.") && text.contains("1 for unknown steps"),
        "{text}"
    );
    assert_eq!(states(&html), ["unknown"]);
    let mut back: Vec<String> = queues.drain(&queues.url).await.into_iter().filter_map(|m| m.body).collect();
    back.sort();
    let mut expected = vec![body(live.step_id, live.lease_token), "oops".to_owned()];
    expected.sort();
    assert_eq!(back, expected, "on the step queue, once each");

    let (status, _, html) = page(&client, Method::POST, "/dlq/action", cookie, form("drop", &csrf)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(said(&html).contains("purge or redrive") && html.contains("<code>action</code>"), "{html}");
}

#[sqlx::test(migrator = "rara_store::MIGRATOR")]
async fn without_a_dlq_the_page_says_it_is_not_configured(pool: PgPool) {
    let client = Client::new(pool);
    let (status, _, html) = page(&client, Method::GET, "/dlq", None, None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(r#"id="not-configured""#) && html.contains("RARA_DLQ_URL"), "{html}");
    let session = client.session().await;
    let (_, _, html) = page(&client, Method::GET, "/", Some(&session), None).await;
    let form = Some(format!("csrf={}&action=purge", csrf_of(&html)));
    let (status, _, html) = page(&client, Method::POST, "/dlq/action", Some(&session), form).await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert!(said(&html).contains("no dead-letter queue is configured"), "{html}");
}
