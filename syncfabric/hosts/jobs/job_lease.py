"""A job's lease, kept by its owner while it runs: PUT /jobs/<id>/lease every third of
the lease from a thread of its own. A job whose owner dies, or cannot DELETE it because
the controller is away, is then released by the controller once the lease runs out
(also after a restart: the lease is saved with the job). A controller that does not
answer is asked again at the next renewal; the rounds go on meanwhile, since the
switches keep the job's flows."""

import logging
import threading

from syncfabric.hosts.transport.controller_client import ControllerHttpError

LOG = logging.getLogger("syncfabric.hosts")
LEASE_S = 30.0   # the lease a job gets when its creator names none: the time a job whose
#                  owner died holds the fabric


class LeaseKeeper:
    """Renews job `job_id`'s lease of `ttl_s` seconds through `client` (its owner's: the
    renewal carries the release key) until stop()."""

    def __init__(self, client, job_id, ttl_s):
        self.client, self.job_id, self.ttl_s = client, job_id, ttl_s
        self.stopping = threading.Event()
        self.unanswered = None   # the error of the renewal that last failed, until one works
        self.thread = threading.Thread(target=self._keep, name="syncfabric-lease-%d" % job_id,
                                       daemon=True)
        self.thread.start()

    def stop(self):
        self.stopping.set()
        self.thread.join()

    def _keep(self):
        while not self.stopping.wait(self.ttl_s / 3):
            try:
                self.client.put("/jobs/%d/lease" % self.job_id, {"ttl_s": self.ttl_s})
            except ControllerHttpError as error:
                if error.status == 404:   # released: lease lapsed, or a new fabric
                    LOG.error("job %d is gone, its lease not renewed (%s): its rounds will "
                              "fail; make a new job", self.job_id, error)
                    return
                self._unanswered(error)
            except Exception as error:   # the controller away or restarting: ask again
                self._unanswered(error)
            else:
                if self.unanswered is not None:
                    LOG.info("job %d: lease renewed again", self.job_id)
                self.unanswered = None

    def _unanswered(self, error):
        if self.unanswered is None:
            LOG.warning("job %d: lease not renewed (%s); trying again every %.1f s, the job "
                        "is released if none gets through within %.1f s", self.job_id, error,
                        self.ttl_s / 3, self.ttl_s)
        self.unanswered = error
