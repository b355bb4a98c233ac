"""Helpers to compare our Model with Pinocchio on the same URDF (test support only)."""
from __future__ import annotations

import numpy as np
import pinocchio as pin


class PinPair:
    """A Pinocchio model/data built from the same file, with coordinate maps from ours to theirs."""

    def __init__(self, model, path, floating=False, mimic=False):
        kwargs = {"mimic": mimic}
        if floating:
            self.pm = pin.buildModelFromUrdf(str(path), pin.JointModelFreeFlyer(), **kwargs)
        else:
            self.pm = pin.buildModelFromUrdf(str(path), **kwargs)
        self.pd = self.pm.createData()
        self.model = model
        self.joint_ids = []
        for i, name in enumerate(model.body_names):
            if model.vfull_mimic[model.body_vadr[i]] >= 0:
                continue
            self.joint_ids.append((i, self.pm.getJointId(name)))

    def q(self, q):
        out = np.zeros(self.pm.nq)
        m = self.model
        for body, jid in self.joint_ids:
            jm = self.pm.joints[jid]
            a = m.qfull_src[m.body_qadr[body]]
            kind = m.jnt_type[body]
            if kind == "free":
                out[jm.idx_q:jm.idx_q + 3] = q[a:a + 3]
                out[jm.idx_q + 3:jm.idx_q + 7] = np.r_[q[a + 4:a + 7], q[a + 3]]
            elif kind == "ball":
                out[jm.idx_q:jm.idx_q + 4] = np.r_[q[a + 1:a + 4], q[a]]
            elif jm.nq == 2:  # continuous joint: (cos, sin)
                out[jm.idx_q:jm.idx_q + 2] = [np.cos(q[a]), np.sin(q[a])]
            else:
                out[jm.idx_q] = q[a]
        return out

    def v_perm(self):
        """Index array p with ours[k] == theirs[p[k]]."""
        m, perm = self.model, []
        for _, jid in self.joint_ids:
            jm = self.pm.joints[jid]
            perm += list(range(jm.idx_v, jm.idx_v + jm.nv))
        assert len(perm) == m.nv
        return np.array(perm)
