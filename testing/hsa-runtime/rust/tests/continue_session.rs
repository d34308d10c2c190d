//! `continue_session` sees the state the previous session left: dropping a
//! session does not reset. Kept alone in its own test binary, because another
//! test of the same process could otherwise take a (resetting) session
//! between the two steps.

use hsa_sim::{continue_session, session};

#[test]
fn dropping_a_session_keeps_the_state_for_inspection() {
    let (exe, var) = {
        let sim = session(1);
        let exe = sim.executable_create();
        let var = sim.add_variable(exe, sim.gpu(0), "v", 8, false);
        (exe, var)
    };
    let sim = continue_session();
    assert_eq!(sim.executables(), vec![exe]);
    assert_eq!(sim.gpu_count(), 1);
    // SAFETY: the variable's storage lives until the executable is destroyed.
    assert_eq!(unsafe { *var }, 0);
}
