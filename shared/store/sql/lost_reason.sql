-- Why a holder lost step $1: its status, its error (a cancel's reason), and who holds it now
-- (worker, fence). Read after a fenced write matched nothing, to tell the remote side the truth.
SELECT status::text AS "status!", error, leased_by, fence FROM steps WHERE id = $1::uuid
