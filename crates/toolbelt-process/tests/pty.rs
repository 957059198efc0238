//! A child on a pseudo-terminal: it sees a terminal on 0, 1 and 2 and has it as its
//! controlling terminal; what it prints reaches the master, what is written to the master
//! is its input, and the master reads end once the child is gone.

use std::time::Duration;

use toolbelt_process::{Contain, Containment, Grace, Pty};

#[tokio::test(flavor = "multi_thread")]
async fn a_child_on_a_pty_reads_writes_and_owns_its_terminal() {
    for containment in [Containment::Subreaper, Containment::Auto] {
        let pty = Pty::open(24, 80).unwrap();
        let mut command = tokio::process::Command::new("sh");
        // `tty` names the terminal on stdin; `ps -o tty=` the controlling one ('?' if none).
        command
            .arg("-c")
            .arg("read line; echo \"got:$line\"; test -t 1 && echo out-tty; ps -o tty= -p $$")
            .stdin(pty.slave.try_clone().unwrap())
            .stdout(pty.slave.try_clone().unwrap())
            .stderr(pty.slave);
        let mut child = Contain::new(containment)
            .pre_exec(Box::new(|| {
                toolbelt_process::take_controlling_terminal();
                Ok(())
            }))
            .spawn(command)
            .unwrap();
        pty.master.write_all(b"hello\n").await.unwrap();
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        let read_all = async {
            loop {
                match pty.master.read(&mut buf).await.unwrap() {
                    0 => break,
                    n => seen.extend_from_slice(&buf[..n]),
                }
            }
        };
        tokio::time::timeout(Duration::from_secs(20), read_all)
            .await
            .expect("the master reads end when the child is gone");
        let text = String::from_utf8_lossy(&seen).replace("\r\n", "\n");
        assert!(text.contains("got:hello\n"), "{containment:?}: {text:?}");
        assert!(text.contains("out-tty\n"), "{containment:?}: {text:?}");
        assert!(
            text.contains("pts/"),
            "no controlling terminal ({containment:?}): {text:?}"
        );
        let (outcome, cleanup) = child
            .close(Grace {
                eof: Duration::from_millis(100),
                term: Duration::from_millis(300),
            })
            .await;
        assert!(outcome.is_some_and(|o| o.success()), "{containment:?}");
        assert!(cleanup.complete);
    }
}
