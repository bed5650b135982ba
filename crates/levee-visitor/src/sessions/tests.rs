use super::*;
use http::HeaderValue;

fn proven() -> Arc<Proven> {
    Arc::new(Proven::new(1000))
}

fn sessions() -> Sessions {
    Sessions::new(CookieMatcher::new(&["PHPSESSID".into()]).unwrap(), proven())
}

fn cookies(v: &'static str) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(COOKIE, HeaderValue::from_static(v));
    h
}

#[test]
fn configured_and_learned_names_make_a_request_personal() {
    let s = sessions();
    assert_eq!(
        s.session_cookie(&cookies("_ga=1; PHPSESSID=x")),
        Ok(Some("PHPSESSID"))
    );
    assert_eq!(s.session_cookie(&cookies("_ga=1; DokuWiki=abc")), Ok(None));
    let mut resp = HeaderMap::new();
    resp.append(
        SET_COOKIE,
        HeaderValue::from_static("DokuWiki=abc; path=/; HttpOnly"),
    );
    resp.append(
        SET_COOKIE,
        HeaderValue::from_static("DW68700bfd=deleted; expires=Thu, 01 Jan 1970 00:00:00 GMT"),
    );
    s.learn(&resp);
    assert_eq!(
        s.session_cookie(&cookies("_ga=1; DokuWiki=abc")),
        Ok(Some("DokuWiki"))
    );
    assert_eq!(
        s.session_cookie(&cookies("DW68700bfd=x")),
        Ok(Some("DW68700bfd"))
    );
    assert_eq!(s.session_cookie(&cookies("_ga=1; theme=dark")), Ok(None));
    assert!(
        !s.is_configured("DokuWiki"),
        "learned names are not dropped from responses"
    );
}

#[test]
fn cookies_everyone_gets_alike_are_never_learned() {
    let s = sessions();
    let mut resp = HeaderMap::new();
    resp.insert(
        SET_COOKIE,
        HeaderValue::from_static("wordpress_test_cookie=WP%20Cookie%20check; path=/"),
    );
    s.learn(&resp);
    assert_eq!(
        s.session_cookie(&cookies("wordpress_test_cookie=WP%20Cookie%20check")),
        Ok(None)
    );
}

#[test]
fn learning_is_bounded() {
    let s = sessions();
    for i in 0..MAX_LEARNED + 10 {
        let mut resp = HeaderMap::new();
        resp.insert(
            SET_COOKIE,
            HeaderValue::from_str(&format!("c{i}=1")).unwrap(),
        );
        s.learn(&resp);
    }
    assert_eq!(s.learned.load().len(), MAX_LEARNED);
}

fn set_cookies(fields: &[&'static str]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for f in fields {
        h.append(SET_COOKIE, HeaderValue::from_static(f));
    }
    h
}

fn remembering() -> Sessions {
    let s = Sessions::new(
        CookieMatcher::new(&["PHPSESSID".into(), "rx_*".into()])
            .unwrap()
            .with_visitors(&["visit".into()])
            .unwrap(),
        proven(),
    );
    s.remember_anonymous(true);
    s
}

#[test]
fn a_session_started_for_an_anonymous_visitor_keeps_them_anonymous_until_a_post() {
    let s = remembering();
    let get = Method::GET;
    // Not seen given out: personal.
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=a1")),
        Ok(Some("PHPSESSID"))
    );
    s.observe(
        &get,
        "/",
        &HeaderMap::new(),
        StatusCode::OK,
        &set_cookies(&["PHPSESSID=a1; path=/", "rx_login_status=none", "visit=3"]),
    );
    assert_eq!(s.session_cookie(&cookies("PHPSESSID=a1")), Ok(None));
    assert_eq!(
        s.session_cookie(&cookies("visit=9; PHPSESSID=a1; rx_login_status=none")),
        Ok(None)
    );
    // Another value, another name's value: personal.
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=a2")),
        Ok(Some("PHPSESSID"))
    );
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=a1; rx_login_status=8f3c")),
        Ok(Some("rx_login_status"))
    );
    // A GET changes nothing; a POST with it (a login) makes it personal, before the
    // backend answers, and its answer's new session is not remembered.
    s.forget_anonymous(&get, &cookies("PHPSESSID=a1"));
    assert_eq!(s.session_cookie(&cookies("PHPSESSID=a1")), Ok(None));
    s.forget_anonymous(
        &Method::POST,
        &cookies("PHPSESSID=a1; rx_login_status=none"),
    );
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=a1")),
        Ok(Some("PHPSESSID"))
    );
    s.observe(
        &Method::POST,
        "/",
        &cookies("PHPSESSID=a1"),
        StatusCode::OK,
        &set_cookies(&["PHPSESSID=b1"]),
    );
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=b1")),
        Ok(Some("PHPSESSID"))
    );
}

#[test]
fn only_a_cookieless_or_anonymous_get_answered_2xx_starts_one() {
    let s = remembering();
    let get = Method::GET;
    let given = set_cookies(&["PHPSESSID=r1"]);
    // A redirect (a login by link), a member's request, Authorization: not remembered.
    s.observe(&get, "/", &HeaderMap::new(), StatusCode::FOUND, &given);
    s.observe(
        &get,
        "/",
        &cookies("PHPSESSID=member"),
        StatusCode::OK,
        &given,
    );
    let mut auth = HeaderMap::new();
    auth.insert(AUTHORIZATION, HeaderValue::from_static("Basic YTpi"));
    s.observe(&get, "/", &auth, StatusCode::OK, &given);
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=r1")),
        Ok(Some("PHPSESSID"))
    );
    // Off: nothing counts.
    s.remember_anonymous(false);
    s.observe(&get, "/", &HeaderMap::new(), StatusCode::OK, &given);
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=r1")),
        Ok(Some("PHPSESSID"))
    );
}

#[test]
fn a_get_that_deletes_or_redirects_with_a_new_session_ends_it() {
    let s = remembering();
    let get = Method::GET;
    for (held, status, change) in [
        ("PHPSESSID=c0", StatusCode::FOUND, "PHPSESSID=new; path=/"),
        (
            "PHPSESSID=c1",
            StatusCode::OK,
            "PHPSESSID=deleted; expires=Thu, 01-Jan-1970 00:00:01 GMT",
        ),
    ] {
        let given = format!("{held}; path=/");
        let given = HeaderValue::from_str(&given).unwrap();
        let mut first = HeaderMap::new();
        first.insert(SET_COOKIE, given);
        s.observe(&get, "/", &HeaderMap::new(), StatusCode::OK, &first);
        assert_eq!(s.session_cookie(&cookies(held)), Ok(None));
        // The same value again: still anonymous.
        s.observe(&get, "/", &cookies(held), StatusCode::OK, &first);
        assert_eq!(s.session_cookie(&cookies(held)), Ok(None));
        s.observe(&get, "/", &cookies(held), status, &set_cookies(&[change]));
        assert_eq!(
            s.session_cookie(&cookies(held)),
            Ok(Some("PHPSESSID")),
            "{change}"
        );
        assert_eq!(
            s.session_cookie(&cookies("PHPSESSID=new")),
            Ok(Some("PHPSESSID"))
        );
    }
}

/// Rhymix renews its session id every 5 minutes (session_regenerate_id on a GET):
/// the new id is the same visitor's; a shared value changing is a new state.
#[test]
fn a_renewed_id_stays_anonymous_a_changed_flag_does_not() {
    let s = remembering();
    let get = Method::GET;
    let start = set_cookies(&["PHPSESSID=r0", "rx_login_status=none"]);
    s.observe(&get, "/", &HeaderMap::new(), StatusCode::OK, &start);
    s.observe(
        &get,
        "/",
        &HeaderMap::new(),
        StatusCode::OK,
        &set_cookies(&["PHPSESSID=r9", "rx_login_status=none"]),
    );
    let held = cookies("PHPSESSID=r0; rx_login_status=none");
    s.observe(
        &get,
        "/",
        &held,
        StatusCode::OK,
        &set_cookies(&["PHPSESSID=r1"]),
    );
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=r1; rx_login_status=none")),
        Ok(None)
    );
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=r0")),
        Ok(Some("PHPSESSID"))
    );
    // The flag everyone got changes for this visitor: their session is no longer
    // anonymous, the flag still is for everyone else.
    let held = cookies("PHPSESSID=r1; rx_login_status=none");
    s.observe(
        &get,
        "/",
        &held,
        StatusCode::OK,
        &set_cookies(&["rx_login_status=h9TTCBTs3dTd6f6ImpWSjn7f"]),
    );
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=r1")),
        Ok(Some("PHPSESSID"))
    );
    assert_eq!(
        s.session_cookie(&cookies("PHPSESSID=r9; rx_login_status=none")),
        Ok(None)
    );
}

#[test]
fn an_unreadable_cookie_field_is_treated_as_personal() {
    let s = sessions();
    let mut h = HeaderMap::new();
    h.insert(COOKIE, HeaderValue::from_bytes(b"a=\xff").unwrap());
    assert!(s.session_cookie(&h).is_err());
}
