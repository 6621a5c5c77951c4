//! Dependency cycles: a plan's steps must form a DAG; the first cycle found is named step by
//! step (`dependency cycle: a -> c -> b -> a`).

use crate::workflow::plan::PlannedStep;
use crate::workflow::problem::Problem;

/// The problem of the first dependency cycle among `steps`, at the `depends_on` of its first
/// step, or `None` when they form a DAG.
pub(crate) fn cycle_problem(steps: &[PlannedStep]) -> Option<Problem> {
    let cycle = find_cycle(steps)?;
    let names: Vec<&str> = cycle.iter().map(|&i| steps[i].name.as_str()).collect();
    Some(Problem {
        path: format!("steps[{}].depends_on", cycle[0]),
        message: format!("dependency cycle: {}", names.join(" -> ")),
    })
}

/// A dependency cycle as step indices, first step repeated at the end, or `None`.
fn find_cycle(steps: &[PlannedStep]) -> Option<Vec<usize>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        Open,
        Done,
    }
    let mut marks = vec![Mark::New; steps.len()];
    for root in 0..steps.len() {
        if marks[root] != Mark::New {
            continue;
        }
        // Iterative depth-first search; `path` holds the open steps with their next edge.
        let mut path: Vec<(usize, usize)> = vec![(root, 0)];
        marks[root] = Mark::Open;
        while let Some(&mut (node, ref mut edge)) = path.last_mut() {
            if let Some(&next) = steps[node].depends_on.get(*edge) {
                *edge += 1;
                match marks[next] {
                    Mark::Open => {
                        let start = path.iter().position(|&(n, _)| n == next).unwrap_or(0);
                        let mut cycle: Vec<usize> = path[start..].iter().map(|&(n, _)| n).collect();
                        cycle.push(next);
                        return Some(cycle);
                    }
                    Mark::New => {
                        marks[next] = Mark::Open;
                        path.push((next, 0));
                    }
                    Mark::Done => {}
                }
            } else {
                marks[node] = Mark::Done;
                path.pop();
            }
        }
    }
    None
}
