//! Unit tests of `plan.rs`.

use super::*;

#[test]
fn a_script_reads_back_what_it_prints() {
    let text = "0 rates loss=0.5 dup=0 delay=0 reorder=0.25\n\
                1000 crash gm0 # the GM dies\n\
                2000 partition gm0,lm1 | w3\n\
                2500 heal\n3000 restart gm0\n100 skew lm1 -5000\n\
                400 refuse w2\n500 accept w2\n600 broker down\n700 broker up\n\
                800 rates link=state loss=0.5\n900 rates link=state off\n";
    let schedule = Schedule::parse(text).unwrap();
    assert_eq!(schedule.faults.len(), 12);
    let state = LinkRates {
        loss: 0.5,
        ..LinkRates::default()
    };
    let at = Micros(800_000);
    assert_eq!(
        schedule.faults[6],
        (at, Fault::Rates(Some(Link::State), state))
    );
    assert!(Schedule::parse("1 rates link=disk loss=1").is_err());
    assert_eq!(
        schedule.faults[1],
        (Micros(100_000), Fault::Skew(Role::Lm(1), -5000))
    );
    let again = Schedule::parse(&schedule.to_string()).unwrap();
    assert_eq!(again, schedule);
}

#[test]
fn a_bad_script_line_is_named_with_the_reason() {
    let e = Schedule::parse("10 crash gm0\n20 crash xx1\n").unwrap_err();
    assert_eq!(e.line, 2);
    assert!(e.reason.contains("xx1"), "{e}");
    let exact = Schedule::parse("2848.125 heal\n7.5 heal").unwrap();
    assert_eq!(exact.faults[0].0, Micros(7_500));
    assert_eq!(exact.faults[1].0, Micros(2_848_125));
    assert_eq!(Schedule::parse(&exact.to_string()).unwrap(), exact);
    assert!(Schedule::parse("1.2345 heal").is_err());
    let e = Schedule::parse("1x crash gm0").unwrap_err();
    assert!(e.reason.contains("1x"), "{e}");
    assert!(Schedule::parse("5 refuse gm1")
        .unwrap_err()
        .reason
        .contains("not a worker"));
    assert!(Schedule::parse("5 rates loss=2").is_err());
}

#[test]
fn a_script_naming_a_role_the_cluster_lacks_is_refused_and_closed_means_every_fault_ends() {
    let roles = Roles {
        gms: 2,
        lms: 2,
        workers: 4,
    };
    let ok = Schedule::parse("1 crash w3\n2 restart w3\n3 partition gm1 | lm1\n4 heal").unwrap();
    assert!(ok.check_roles(roles).is_ok());
    assert!(ok.is_closed());
    let open = Schedule::parse("1 crash w3\n3 partition gm1 | lm1\n4 heal").unwrap();
    assert!(!open.is_closed());
    let e = Schedule::parse("1 refuse w4")
        .unwrap()
        .check_roles(roles)
        .unwrap_err();
    assert!(e.contains("w4 does not exist"), "{e}");
}

#[test]
fn a_random_schedule_is_a_function_of_its_seed_and_ends_every_fault() {
    let roles = Roles {
        gms: 2,
        lms: 2,
        workers: 4,
    };
    let h = Micros::from_secs(20);
    let a = random(7, roles, &FaultRates::default(), h);
    assert_eq!(a, random(7, roles, &FaultRates::default(), h));
    assert!(a.faults.iter().all(|(at, _)| *at < h));
    let crashes = a
        .faults
        .iter()
        .filter(|(_, f)| matches!(f, Fault::Crash(_)))
        .count();
    let restarts = a
        .faults
        .iter()
        .filter(|(_, f)| matches!(f, Fault::Restart(_)))
        .count();
    assert_eq!(crashes, restarts);
}
